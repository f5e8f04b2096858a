"""Problems are untrusted too: in co-evolution the Proposer writes them. A problem's code
runs in reference workers, which are confined like executors and bound to one problem
each, so a problem built to attack cannot change another problem's reference outputs or
write the run's files and caches.

Each test is the attack that defeated the previous design, where one trusted, persistent
reference worker served every problem with the user's rights."""

from __future__ import annotations

import time

import pytest

from kz_core.evaluate import Evaluator, isolation
from kz_core.model import Candidate, Problem, Verdict

from .conftest import EXAMPLE_CANDIDATES, REPO, eval_config

#: These tests evaluate Triton kernels: without kz-backend-triton they skip (tests/conftest.py).
pytestmark = pytest.mark.triton

VECTOR_ADD = (REPO / "examples" / "problems" / "1_vector_add.py").read_text()
SCALED_RELU = (REPO / "examples" / "problems" / "2_scaled_relu.py").read_text()
HONEST_RELU = (EXAMPLE_CANDIDATES / "triton" / "2_scaled_relu.py").read_text()
HONEST_ADD = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()

# A kernel that writes zeros: correct only against a reference that is zeros too.
ZEROS_RELU = HONEST_RELU.replace("y = tl.maximum(x, 0.0) * scale", "y = x * 0.0")

# A problem whose module, when a reference worker imports it, makes torch.relu return
# zeros for the rest of that process's life.
POISON = VECTOR_ADD + '''

def _poison():
    import torch

    original = torch.relu
    torch.relu = lambda x, *a, **k: original(x) * 0.0
    torch.Tensor.relu = lambda self, *a, **k: original(self) * 0.0


_poison()
'''


def run_in_order(problems: list[Problem], batches: list[list[Candidate]], *overrides: str) -> list:
    """Evaluate ``batches`` one after the other with one reference worker."""
    config = eval_config("eval.workers=1", "eval.reference_workers=1", "eval.run_timeout_s=120", *overrides)
    results = []
    with Evaluator(problems, config) as evaluator:
        for batch in batches:
            results += evaluator.evaluate(batch)
    return results


def test_a_problem_cannot_change_the_reference_of_a_problem_served_after_it():
    problems = [Problem("poison", POISON), Problem("2_scaled_relu", SCALED_RELU)]
    poison_first = [Candidate("poison", "triton", HONEST_ADD, "add")]
    relu = [Candidate("2_scaled_relu", "triton", HONEST_RELU, "honest"), Candidate("2_scaled_relu", "triton", ZEROS_RELU, "zeros")]
    first, honest, zeros = run_in_order(problems, [poison_first, relu])
    assert first.verdict is Verdict.CORRECT, first.message
    assert honest.verdict is Verdict.CORRECT, honest.message
    assert zeros.verdict is not Verdict.CORRECT, "a kernel writing zeros passed against a poisoned reference"


@pytest.mark.skipif(not isolation.support().landlock_abi, reason="this kernel has no Landlock (the sandbox reports it and runs without)")
def test_a_problem_cannot_write_the_runs_caches_or_the_users_files(tmp_path, monkeypatch):
    cache = tmp_path / "kz-cache"
    cache.mkdir()
    monkeypatch.setenv("KZ_CACHE_DIR", str(cache))
    targets = [cache / "baselines.sqlite", tmp_path / "planted.txt", tmp_path / "kz-cache" / "triton-executor" / "planted"]
    writes = "\n".join(
        f"    try:\n        open({str(path)!r}, 'w').write('planted')\n    except OSError:\n        pass" for path in targets
    )
    hostile = VECTOR_ADD + f"\n\ndef _plant():\n{writes}\n\n\n_plant()\n"
    (result,) = run_in_order([Problem("1_vector_add", hostile)], [[Candidate("1_vector_add", "triton", HONEST_ADD, "add")]], "eval.cache=true")
    assert result.verdict is Verdict.CORRECT, result.message
    planted = [str(path) for path in targets if path.exists() and path.read_bytes().startswith(b"planted")]
    assert not planted, f"the problem's code wrote {planted}"


# A problem whose code looks around the process it runs in: alone (in a PID namespace of
# its own, under its init, PID 1, with no other process in its /proc), its module adds x and
# y; anywhere else it adds one more, so the honest candidate's sum is incorrect against it.
LOOKS_AROUND = VECTOR_ADD.replace("return a + b", "return a + b + _OUTSIDE") + '''

def _outside():
    import os

    others = [entry for entry in os.listdir("/proc") if entry.isdigit() and int(entry) not in (os.getpid(), 1)]
    return 0.0 if os.getppid() in (0, 1) and os.path.isdir("/proc/1") and not others else 1.0


_OUTSIDE = _outside()
'''


@pytest.mark.skipif(not isolation.support().pid_namespace, reason="no PID namespaces here (the sandbox reports it and tracks processes instead)")
def test_a_problems_code_runs_alone_in_a_pid_namespace():
    """Reference workers and executors run a problem's code (the Proposer's, in
    co-evolution) in PID namespaces of their own, as candidates do: such code cannot see
    or signal kz's other processes, and what it starts dies with its worker."""
    assert "return a + b + _OUTSIDE" in LOOKS_AROUND
    (result,) = run_in_order([Problem("1_vector_add", LOOKS_AROUND)], [[Candidate("1_vector_add", "triton", HONEST_ADD, "add")]])
    assert result.verdict is Verdict.CORRECT, result.message


def test_a_reference_worker_serves_one_problem(tmp_path):
    """The pool's binding: the same key gets the same worker, another key a fresh one."""
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "reference", 1, settings, zygote=zygote, single_use=False)
    try:
        with pool.acquire("a") as worker:
            first = worker.worker_pid
        with pool.acquire("a") as worker:
            assert worker.worker_pid == first
        with pool.acquire("b") as worker:
            second = worker.worker_pid
        assert second != first
        with pool.acquire("a") as worker:
            assert worker.worker_pid not in (first, second)
        with pool.acquire() as worker:  # no key: any idle worker
            assert worker.binding == "a"
    finally:
        pool.close()
        zygote.close()


def test_a_reference_worker_asked_for_by_pid_serves_when_idle(tmp_path):
    """Two workers bound to one problem (two requests of it at once): ``prefer`` picks the
    one named, idle, over the one returned last (the compile baseline goes to the worker
    that compiled it ahead, ``ReferenceService.compile_ahead``)."""
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "reference", 2, settings, zygote=zygote, single_use=False)
    try:
        with pool.acquire("a") as first, pool.acquire("a") as second:
            pids = (first.worker_pid, second.worker_pid)
        assert pids[0] != pids[1]
        for pid in (*pids, *reversed(pids)):
            with pool.acquire("a", prefer=pid) as worker:
                assert worker.worker_pid == pid
        with pool.acquire("a", prefer=pids[0]) as worker, pool.acquire("a", prefer=pids[0]) as other:
            assert other.worker_pid == pids[1]  # the one named is busy: another bound to the key
    finally:
        pool.close()
        zygote.close()


def _spares(pool, count: int = 1) -> list[int]:
    """The pids of ``pool``'s idle unbound workers once at least ``count`` are started and
    none is still starting."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = [w.worker_pid for w in list(pool._idle.queue) if w.binding is None]
        if len(found) >= count and not pool._spares_starting:
            return found
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} spare workers were started")


def test_a_keyed_pool_starts_the_next_problems_worker_ahead(tmp_path):
    """Binding the last unbound worker starts another in the background (in place of the
    least recently used idle one when the pool is full), so that a new problem does not
    wait for a worker, and its CUDA context, to start; the starts are recorded."""
    from kz_core.evaluate.contention import Contention
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "reference", 2, settings, zygote=zygote, single_use=False)
    pool.contention = Contention()
    try:
        with pool.acquire("a") as worker:
            first = worker.worker_pid
        ready = _spares(pool)
        with pool.acquire("b") as worker:
            assert worker.worker_pid in ready  # the spare, started ahead
        ready = _spares(pool)  # the pool was full: "a"'s idle worker made room for it
        assert first not in ready
        with pool.acquire("c") as worker:
            assert worker.worker_pid in ready
        with pool.acquire("a") as worker:
            assert worker.worker_pid != first
        assert pool.contention.snapshot()["reference start"]["taken"] >= 4
    finally:
        pool.close()
        zygote.close()


def test_a_keyed_pool_keeps_as_many_spares_as_asked(tmp_path):
    """Written against the version before, which kept one spare: on the H200 a new problem
    came every 3 s and a reference worker took 4 s to start, so candidates waited for
    starts. With ``spares=2`` two unbound workers are idle or starting after each new key,
    never more, and each new key takes one of them."""
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "reference", 5, settings, zygote=zygote, single_use=False, spares=2)
    try:
        with pool.acquire("a"):
            pass
        ready = _spares(pool, 2)
        assert len(ready) == 2
        with pool.acquire("b") as worker:
            assert worker.worker_pid in ready
        again = _spares(pool, 2)
        assert len(again) == 2 and len(set(again) - set(ready)) == 1
        assert pool._live == 4  # a, b and two spares: the fifth slot is left free
    finally:
        pool.close()
        zygote.close()


def test_a_pinned_problems_worker_is_the_last_to_make_room(tmp_path):
    """While a candidate of a problem is in flight its reference worker is pinned: a new
    key ends another idle worker first, and no spare is started in its place."""
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "reference", 2, settings, zygote=zygote, single_use=False)
    pool._spare = lambda: None  # no spares while the two slots are set up
    try:
        with pool.acquire("a") as worker:
            a = worker.worker_pid
        with pool.acquire("b") as worker:
            b = worker.worker_pid
        with pool.pinned("b"):
            # "b" was returned last, so "a" is the least recently used: it would go anyway.
            # Use "a" again so that "b" is now the least recently used idle worker.
            with pool.acquire("a") as worker:
                assert worker.worker_pid == a
            with pool.acquire("c"):  # full: "a" makes room, not the pinned "b"
                pass
            with pool.acquire("b") as worker:
                assert worker.worker_pid == b
        del pool._spare
        with pool.pinned("b"), pool.pinned("c"):
            pool._spare()  # full, and every idle worker is pinned: no spare
            assert all(w.binding is not None for w in list(pool._idle.queue))
            assert pool._live == 2
        with pool.acquire("c") as worker:  # unpinned now, "c" is still served by its worker
            assert worker.binding == "c"
    finally:
        pool.close()
        zygote.close()


@pytest.mark.gpu
def test_a_problem_cannot_change_another_problems_reference_on_the_gpu():
    """The same on a GPU, where reference workers and executors share tensors through
    CUDA IPC from separately confined processes."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU")
    problems = [Problem("poison", POISON), Problem("2_scaled_relu", SCALED_RELU)]
    poison_first = [Candidate("poison", "triton", HONEST_ADD, "add")]
    relu = [Candidate("2_scaled_relu", "triton", HONEST_RELU, "honest"), Candidate("2_scaled_relu", "triton", ZEROS_RELU, "zeros")]
    first, honest, zeros = run_in_order(problems, [poison_first, relu], "eval.device=cuda")
    assert first.verdict is Verdict.CORRECT, first.message
    assert honest.verdict is Verdict.CORRECT, honest.message
    assert zeros.verdict is not Verdict.CORRECT, "a kernel writing zeros passed against a poisoned reference"


# A problem whose module forks until a child of its worker holds, in the worker's PID
# namespace, the number ``{target}``, and leaves that child asleep.
TAKES_A_NUMBER = VECTOR_ADD + '''

def _take(target):
    import os, time

    while True:
        pid = os.fork()
        if pid == 0:
            if os.getpid() == target:
                time.sleep(600)
            os._exit(0)
        if pid >= target:
            return
        os.waitpid(pid, 0)


_take({target})
'''


@pytest.mark.skipif(not isolation.support().pid_namespace, reason="needs PID namespaces")
def test_a_supervisor_stopped_kills_no_process_outside_its_namespace(tmp_path):
    """A supervisor told to stop ends its worker's namespace and nothing else. Written
    against the version before it, which walked /proc for the processes below it: the
    namespace's init had mounted the namespace's own /proc, which the supervisor shares,
    so it killed, by the numbers it read there, whichever processes outside had those
    numbers (here a bystander; in a batch, another candidate's worker)."""
    import os
    import subprocess

    from kz_core.evaluate.calls import call_worker, problem_payload
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    try:
        with open("/proc/sys/kernel/ns_last_pid", "r+") as handle:
            handle.read()
    except OSError:
        pytest.skip("this process cannot choose the next process id (not root)")
    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "reference", 1, settings, zygote=zygote, single_use=False)
    bystander = None
    try:
        with pool.acquire("p") as worker:
            outside = worker.process.pid  # the worker's own number inside its namespace
            target = outside + 64
            while os.path.exists(f"/proc/{target}") or os.path.exists(f"/proc/{target - 1}"):
                target += 2
            with open("/proc/sys/kernel/ns_last_pid", "w") as handle:
                handle.write(str(target - 1))
            bystander = subprocess.Popen(["sleep", "300"])
            if bystander.pid != target:
                pytest.skip("another process took the number first")
            problem = Problem("p", TAKES_A_NUMBER.replace("{target}", str(target)))
            reply, failure = call_worker(worker, {"op": "footprint", "problem": problem_payload(problem), "init_seed": 1}, 120, "footprint")
            assert failure is None, failure
            worker.process.terminate()  # what kill() does after signalling the init
            worker.process.wait(timeout=30)  # the version before never ended: it kept killing
            worker.retired = True
        time.sleep(0.5)
        assert bystander.poll() is None, "the supervisor killed a process outside its namespace"
    finally:
        if bystander is not None:
            bystander.kill()
            bystander.wait()
        pool.close()
        zygote.close()


def test_a_closing_pool_asks_every_idle_worker_to_exit_before_waiting_for_any(tmp_path, monkeypatch):
    """Written against the version before, which asked and waited one worker at a time: on
    an H200 a worker takes about a second to exit with its CUDA context, and an evaluator
    of two dozen workers was still closing 35 s after its last result. Now every idle
    worker is sent its shutdown before any is waited for, and all are gone after close."""
    from kz_core.evaluate import sandbox
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "reference", 3, settings, zygote=zygote, single_use=False)
    events: list[str] = []
    send, remove = sandbox.wire.send_request, sandbox._remove_tree

    def recording_send(sock, request):
        if request.get("op") == "shutdown":
            events.append("asked")
        return send(sock, request)

    def recording_remove(path):
        events.append("gone")
        return remove(path)

    try:
        for key in ("a", "b"):
            with pool.acquire(key):
                pass
        _spares(pool)  # a, b and a spare: three idle workers in three slots
        workers = list(pool._idle.queue)
        assert len(workers) == 3
        monkeypatch.setattr(sandbox.wire, "send_request", recording_send)
        monkeypatch.setattr(sandbox, "_remove_tree", recording_remove)
        pool.close()
        assert events == ["asked"] * 3 + ["gone"] * 3, events
        assert all(w.retired for w in workers)
        assert all(w.process.poll() is not None for w in workers)
    finally:
        monkeypatch.undo()
        pool.close()
        zygote.close()


# A problem whose forward takes a Python number that get_inputs draws anew for each seed.
RANDOM_SCALE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, s):
        return x * s


def get_inputs():
    return [torch.randn(64), float(torch.rand(()).item()) * 4 - 2]


def get_init_inputs():
    return []
"""

SCALE_BY_INPUT = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, s):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 128),)](x, out, s, x.numel(), BLOCK=128)
        return out
"""


def test_a_problem_whose_python_inputs_change_with_the_seed_says_it_is_not_supported():
    """Written against over-rejection probe 16's version: a candidate's forward is replayed
    with the non-tensor values it was recorded with, so an honest kernel scaling by a
    Python number that ``get_inputs`` draws per seed was a silent ``mismatch`` on every
    element. The problem says what is wrong with it now, for every candidate."""
    problem = Problem("random_scale", RANDOM_SCALE)
    result = run_in_order([problem], [[Candidate("random_scale", "triton", SCALE_BY_INPUT, "honest")]])[0]
    message = " ".join(f.message for f in result.findings if f.check == "reference_error")
    assert "input 1 a Python value that changes with the seed" in message, result.message


# A problem whose module fills its worker's scratch folder (its HOME) with 256 MiB, 16 MiB
# at a time, until a write fails: bounded, it adds x and y; not, one more, so the honest
# candidate's sum is incorrect against it.
FILLS_ITS_FOLDER = VECTOR_ADD.replace("return a + b", "return a + b + _UNBOUNDED") + '''

def _fill():
    import os

    written, path = 0, os.path.join(os.environ["HOME"], "fill")
    try:
        with open(path, "wb") as handle:
            while written < 256 << 20:
                handle.write(b"x" * (16 << 20))
                handle.flush()
                written += 16 << 20
    except OSError:
        return 0.0
    finally:
        os.unlink(path)
    return 1.0


_UNBOUNDED = _fill()
'''


@pytest.mark.skipif(not (isolation.support().pid_namespace and isolation.support().private_shm), reason="no private memory file systems here (the sandbox reports it)")
def test_a_problems_code_fills_a_bounded_memory_file_system_not_the_disk(monkeypatch):
    """Reference workers and executors wrote their scratch folders on the disk kz's files
    are on, with no quota; a problem's code (the Proposer's, in co-evolution) could fill it.
    Now each folder is a memory file system of its own (here made 64 MiB): the writes past
    it fail in that worker, and nothing is left on the disk."""
    monkeypatch.setattr(isolation, "SERVICE_SCRATCH_BYTES", 64 << 20, raising=False)
    monkeypatch.setattr(isolation, "SCRATCH_BYTES", 64 << 20)
    (result,) = run_in_order([Problem("1_vector_add", FILLS_ITS_FOLDER)], [[Candidate("1_vector_add", "triton", HONEST_ADD, "add")]])
    assert result.verdict is Verdict.CORRECT, result.message
