"""The sandbox: crashing, exiting, hanging, memory-hungry and import-failing candidates get
failure verdicts, the rest of the batch is untouched, secrets never reach candidate code,
and no process outlives the evaluator."""

from __future__ import annotations

import pytest

import os
from pathlib import Path


from kz_core.evaluate import Evaluator
from kz_core.evaluate.sandbox import MARKER_VARIABLE, SESSION_MARKER, scrubbed_environment
from kz_core.model import Candidate, Verdict

from .conftest import EXAMPLE_CANDIDATES, eval_config

#: These tests evaluate Triton kernels: without kz-backend-triton they skip (tests/conftest.py).
pytestmark = pytest.mark.triton

GOOD = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()
FORWARD = "    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"


def in_forward(statement: str) -> str:
    """The honest vector-add candidate with ``statement`` run first in forward."""
    assert FORWARD in GOOD
    body = "".join(f"        {line}\n" for line in statement.splitlines())
    return GOOD.replace(FORWARD, FORWARD + body, 1)


def at_import(statement: str) -> str:
    return GOOD + "\n" + statement + "\n"


BAD = {
    "segfault": (in_forward("import ctypes\nctypes.string_at(0)"), Verdict.RUNTIME_ERROR, "killed by SIGSEGV"),
    "exit0": (in_forward("import os\nos._exit(0)"), Verdict.RUNTIME_ERROR, "exited with status 0"),
    "hang": (in_forward("while True:\n    pass"), Verdict.TIMEOUT, "no reply within"),
    "memory": (in_forward("hog = bytearray(1 << 38)"), Verdict.RUNTIME_ERROR, "MemoryError"),
    "import_error": (at_import("raise RuntimeError('broken at import')"), Verdict.COMPILE_ERROR, "broken at import"),
}


def live_marked_processes(grace_s: float = 5.0) -> list[str]:
    """Processes that carry the marker of a worker of this test process (not another kz
    process's on the same machine) and are not exiting, described; waits up to ``grace_s``
    for ones that were killed a moment ago to be gone."""
    import time

    deadline = time.monotonic() + grace_s
    while True:
        found = []
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                if any(item.startswith(f"{MARKER_VARIABLE}={SESSION_MARKER}-".encode()) for item in (entry / "environ").read_bytes().split(b"\0")):
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        found.append(f"{entry.name} [{state}] {(entry / 'cmdline').read_bytes()[:120]!r}")
            except (OSError, ValueError, IndexError):
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_environment_is_reduced_to_the_allowlist(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("SOME_RANDOM_VARIABLE", "x")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    env = scrubbed_environment()
    assert "HF_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env and "SOME_RANDOM_VARIABLE" not in env
    assert env["PYTHONPATH"] == "/somewhere" and "PATH" in env


@pytest.mark.slow
def test_each_failure_gets_its_verdict_and_the_batch_goes_on(example_problems, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_must_not_leak")
    # A candidate that is right only when it cannot see the token.
    token_probe = in_forward("import os\nif 'HF_TOKEN' in os.environ or 'hf_must_not_leak' in str(os.environ):\n    return a * 0")
    candidates = []
    for name, (code, _, _) in BAD.items():
        candidates.append(Candidate("1_vector_add", "triton", code, sample_id=name))
        candidates.append(Candidate("1_vector_add", "triton", GOOD, sample_id=f"good-after-{name}"))
    candidates.append(Candidate("1_vector_add", "triton", token_probe, sample_id="token"))
    config = eval_config("eval.run_timeout_s=8", "eval.compile_timeout_s=30", "eval.memory_limit_gb=8")
    with Evaluator(example_problems, config) as evaluator:
        results = {r.sample_id: r for r in evaluator.evaluate(candidates)}
    for name, (_, verdict, text) in BAD.items():
        result = results[name]
        assert result.verdict is verdict, f"{name}: {result.message}"
        assert any(text in f.message for f in result.findings), f"{name}: {[f.message[:200] for f in result.findings]}"
        assert results[f"good-after-{name}"].verdict is Verdict.CORRECT, results[f"good-after-{name}"].message
    assert results["token"].verdict is Verdict.CORRECT, "HF_TOKEN reached candidate code"
    assert live_marked_processes() == []


#: Digits unique to this test run, in the sleepers that escape tests start: another copy of
#: the suite running on the same machine starts sleepers of its own, which must not count.
RUN_DIGITS = f"{SESSION_MARKER[:6]}".translate(str.maketrans("abcdef", "123456"))


def processes_running(needle: bytes) -> list[int]:
    """Processes of this machine whose command line contains ``needle``."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_children_that_leave_the_process_group_are_killed(example_problems):
    # Hides the call from the static guard and starts a sleeper in a session of its own,
    # with an environment that carries no marker: only the sandbox's PID namespace (or,
    # without one, its supervisor) can find it.
    escape = in_forward(
        "import importlib\n"
        "spawn = getattr(importlib.import_module('subprocess'), 'Po' + 'pen')\n"
        f"child = spawn(['sleep', '301.{RUN_DIGITS}'], start_new_session=True, env={{}})\n"
        "while True:\n    pass"
    )
    config = eval_config("eval.run_timeout_s=6", "eval.compile_timeout_s=6", "eval.workers=1")
    with Evaluator(example_problems, config) as evaluator:
        result = evaluator.evaluate([Candidate("1_vector_add", "triton", escape)])[0]
    assert result.verdict is Verdict.TIMEOUT, result.message
    assert processes_running(f"301.{RUN_DIGITS}".encode()) == [], "the escaped child survived"
    assert live_marked_processes() == []


@pytest.mark.slow
def test_fifty_candidates_with_ten_failures(example_problems):
    """Every failure of BAD twice, among forty honest candidates: each gets its own verdict,
    in order, and nothing is left behind (a hundred candidates took 90 s of the suite and
    showed nothing more)."""
    bad_codes = [code for code, _, _ in BAD.values()] * 2
    candidates = []
    for index in range(50):
        if index % 5 == 3:
            code = bad_codes[index // 5]
            candidates.append(Candidate("1_vector_add", "triton", code, sample_id=f"bad-{index}"))
        else:
            # Distinct sources, so nothing is shared between candidates by accident.
            candidates.append(Candidate("1_vector_add", "triton", GOOD + f"\n# sample {index}\n", sample_id=f"good-{index}"))
    config = eval_config("eval.run_timeout_s=8", "eval.compile_timeout_s=30", "eval.memory_limit_gb=8", "eval.timing=false")
    with Evaluator(example_problems, config) as evaluator:
        results = evaluator.evaluate(candidates)
    assert len(results) == 50 and [r.sample_id for r in results] == [c.sample_id for c in candidates]
    verdicts = {r.sample_id: r.verdict for r in results}
    assert all(v is Verdict.CORRECT for k, v in verdicts.items() if k.startswith("good")), [
        (r.sample_id, r.message) for r in results if r.sample_id.startswith("good") and not r.correct
    ]
    assert all(v is not Verdict.CORRECT for k, v in verdicts.items() if k.startswith("bad"))
    assert live_marked_processes() == []
    assert os.getpid()  # the calling process is alive and well


def test_a_reply_that_reports_a_fatal_cuda_error_retires_its_worker():
    """A worker whose CUDA context died can still reply with results it had on the host
    (a reference whose size variation hit a device-side assert): the reply is used, and
    the worker is replaced all the same."""
    from kz_core.evaluate.calls import call_worker

    class Worker:
        killed = 0

        def __init__(self, reply):
            self.reply = reply

        def call(self, request, timeout):
            return self.reply

        def kill(self):
            self.killed += 1

    dead = Worker({"ok": True, "trials": [1], "cuda_error": True})
    reply, failure = call_worker(dead, {"op": "reference"}, 10, "reference")
    assert failure is None and reply["trials"] == [1] and dead.killed == 1
    healthy = Worker({"ok": True, "trials": [1], "cuda_error": False})
    assert call_worker(healthy, {"op": "reference"}, 10, "reference")[1] is None and healthy.killed == 0
    failed = Worker({"ok": False, "stage": "run", "message": "AcceleratorError: CUDA error: an illegal memory access", "cuda_error": True})
    reply, failure = call_worker(failed, {"op": "trials"}, 10, "correctness trials")
    assert failure is not None and failure.check == "runtime_error" and failed.killed == 1


def test_a_backend_without_trusted_kernels_is_checked_and_timed_in_its_sandbox_and_says_so(example_problems):
    """Backends whose plugin has no ``backend_kernels`` (cuda_inline, third parties) take
    the older path: the candidate's own sandboxed process runs the trials and the timing,
    and the result carries the ``unverified_execution`` warning."""
    import attrs

    with Evaluator(example_problems, eval_config("eval.run_timeout_s=60")) as evaluator:
        evaluator.backends["triton"] = attrs.evolve(evaluator.backends["triton"], trusted_kernels=False)
        good, wrong = evaluator.evaluate([
            Candidate("1_vector_add", "triton", GOOD, sample_id="good"),
            Candidate("1_vector_add", "triton", GOOD.replace("a + b, mask=mask", "a - b, mask=mask"), sample_id="wrong"),
        ])
    assert good.verdict is Verdict.CORRECT, good.message
    assert "unverified_execution" in [f.check for f in good.findings]
    assert good.runtime is not None and good.runtime.median_ms > 0
    assert wrong.verdict is not Verdict.CORRECT


#: A forward that cannot be recorded (``prims``, an operator namespace a plan cannot
#: name) and that lets NumPy compute the sum over the tensors' memory, hidden from torch's
#: profiler, after a copy kernel has run ("a kernel launched"). The cheat a candidate
#: writes to take the unverified route on purpose: in its own process it knows its seeds
#: and could forge any evidence; there the NumPy sum was enough.
UNRECORDABLE_NUMPY = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        torch.ops.prims.convert_element_type.default(a[:1], torch.float32)
        out = torch.empty_like(a)
        copy_kernel[(triton.cdiv(a.numel(), 1024),)](a, out, a.numel(), BLOCK=1024)
        out.numpy()[...] = a.numpy() + b.numpy()
        return out
"""


def test_a_forward_that_cannot_be_recorded_is_refused_unless_unverified_runs_are_asked_for(example_problems):
    """A backend with ``unverified_fallback`` (``cuda_inline``; Triton stands in for it
    here, on the CPU) ran a forward that cannot be recorded in the candidate's own
    process, which decided its own evidence there: this cheat was ``correct`` (with the
    ``unverified_execution`` warning). Now it is ``not_replayable`` unless
    ``eval.unverified_fallback`` is set, and the message says how to set it."""
    import attrs

    from kz_core.evaluate.judge import UNVERIFIED_REFUSED

    candidate = Candidate("1_vector_add", "triton", UNRECORDABLE_NUMPY, sample_id="unrecordable")
    results = {}
    for setting in ("false", "true"):
        with Evaluator(example_problems, eval_config("eval.run_timeout_s=60", f"eval.unverified_fallback={setting}")) as evaluator:
            evaluator.backends["triton"] = attrs.evolve(evaluator.backends["triton"], unverified_fallback=True)
            (results[setting],) = evaluator.evaluate([candidate])
    refused, ran = results["false"], results["true"]
    assert refused.verdict is not Verdict.CORRECT, refused.message
    finding = next(f for f in refused.findings if f.check == "not_replayable")
    assert "prims" in finding.message and UNVERIFIED_REFUSED in finding.message
    # The version before: run in its own process, the cheat was judged correct.
    assert ran.verdict is Verdict.CORRECT, ran.message
    assert "unverified_execution" in [f.check for f in ran.findings]


def test_a_fuzz_example_that_cannot_be_recorded_is_refused_with_the_same_way_out(example_problems):
    """The fuzzer refuses an example whose forward cannot be recorded as ``kz eval``
    refuses such a candidate: ``not_replayable``, with the setting that would run it
    unverified (its message lacked that hint before)."""
    import attrs

    from kz_core.evaluate.judge import UNVERIFIED_REFUSED
    from kz_core.fuzz import FuzzSession

    problem = next(p for p in example_problems if p.name == "1_vector_add")
    candidate = Candidate("1_vector_add", "triton", UNRECORDABLE_NUMPY, sample_id="unrecordable")
    with Evaluator(example_problems, eval_config("eval.run_timeout_s=60")) as evaluator:
        evaluator.backends["triton"] = attrs.evolve(evaluator.backends["triton"], unverified_fallback=True)
        with FuzzSession(problem, candidate, evaluator=evaluator) as session:
            report = session.run(2, seed=1, shrink_s=0.0)
    assert "prims" in report.failure and UNVERIFIED_REFUSED in report.failure, report


def test_a_worker_that_ended_is_never_signalled_by_its_old_process_id(monkeypatch):
    """Process ids come back (32768 of them here, reused within minutes on a busy machine):
    kz signals its workers and their supervisors through pidfds opened while they were
    alive, so a kill after they ended reaches nobody, not a process that got their number."""
    import signal
    import subprocess

    from kz_core.evaluate import sandbox

    own = sandbox._ProcessHandle(os.getpid())
    if own.fd is None:
        pytest.skip("this kernel has no pidfds: kz signals by number there, as the handle says")
    own.close()

    class Zygote:  # knows nothing of the supervisor's end, as when it was reaped long ago
        def exit_status(self, pid):
            return None

    child = subprocess.Popen(["sleep", "60"])
    supervisor = sandbox._ForkedProcess(child.pid, Zygote())
    worker = sandbox._ProcessHandle(child.pid)
    child.kill()
    child.wait()  # reaped: its number is free for the next process
    sent = []
    monkeypatch.setattr(sandbox.os, "kill", lambda pid, signum: sent.append((pid, signum)))
    worker.send(signal.SIGKILL)
    supervisor.terminate()
    assert sent == [], "a signal went by number to whatever process has that id now"
    # A live one is reached through its handle.
    live = subprocess.Popen(["sleep", "60"])
    sandbox._ProcessHandle(live.pid).send(signal.SIGKILL)
    assert live.wait(timeout=30) == -signal.SIGKILL


def test_a_killed_worker_has_exited_when_kill_returns(tmp_path):
    """Killing a sandboxed worker waits for it to exit (its pidfd turns readable): the caller
    gives the candidate's GPU memory reservation back right after, and on an H200 a burst
    of candidates ran out of memory while no reservation was held. The version before sent
    SIGKILL and returned at once, while a worker of a few hundred megabytes was still
    tearing down (and on a GPU, with its kernels and its memory still there)."""
    import select

    from kz_core.evaluate import sandbox
    from kz_core.evaluate.contention import Contention
    from kz_core.evaluate.sandbox import SandboxSettings, WorkerPool, ZygoteProcess

    settings = SandboxSettings(scratch_root=tmp_path)
    zygote = ZygoteProcess("cpu", settings)
    pool = WorkerPool("cpu", "candidate", 1, settings, zygote=zygote)
    pool.contention = Contention()
    try:
        for _ in range(3):
            with pool.acquire() as worker:
                mine = sandbox._ProcessHandle(worker.worker_pid)
                if mine.fd is None:
                    pytest.skip("this kernel has no pidfds: nothing tells kz a worker has exited")
                worker.kill()
                poller = select.poll()
                poller.register(mine.fd, select.POLLIN)
                assert poller.poll(0), "kill() returned before the worker had exited"
                mine.close()
                worker.kill()  # again: nothing more to wait for, and not counted again
        # What the waits cost, for the benchmarks (one per worker killed).
        assert pool.contention.requests()["candidate kill"]["count"] == 3
        pool.close()  # its spare exits when asked: not a kill to count
        assert pool.contention.requests()["candidate kill"]["count"] == 3
    finally:
        pool.close()
        zygote.close()
