"""A cgroup per sandboxed worker (kz_core/evaluate/cgroups.py): where the groups are found
on cgroup v1 and v2 machines, the limits each role gets, the kernel enforcing them on a
worker as a whole, and the path taken where the machine gives no cgroups.

Red-team round 26d, the version before: with ``eval.memory_limit_gb=1.5`` a worker held
3.5 GiB of the host's memory in ``memfd_create`` files (``RLIMIT_AS`` counts mapped memory
only), and a candidate started 3,000 threads in 1.7 s (``RLIMIT_NPROC`` does not bind a
user mapped to the host's root)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import attrs
import pytest

from kz_core.evaluate import cgroups, isolation
from kz_core.evaluate.sandbox import SandboxSettings, sandbox_spec, worker_memory_bytes

from .conftest import eval_config

SUPPORT = isolation.support()
needs_memory = pytest.mark.skipif("memory" not in SUPPORT.cgroups, reason="no memory cgroup kz can make here (the sandbox reports it and runs without)")
needs_pids = pytest.mark.skipif("pids" not in SUPPORT.cgroups, reason="no pids cgroup kz can make here (the sandbox reports it and runs without)")

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_GROUPS = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n0::/\n"


def test_v1_hierarchies_are_found_beneath_the_process_own_groups():
    found = cgroups.places(V1_MOUNTS, V1_GROUPS)
    assert found["memory"] == cgroups.Place("memory", 1, Path("/sys/fs/cgroup/memory/process_api/abc"))
    assert found["pids"] == cgroups.Place("pids", 1, Path("/sys/fs/cgroup/pids"))


def test_a_mount_whose_root_is_a_group_maps_paths_beneath_it_and_hides_others():
    mounts = "35 31 0:32 /process_api /mnt/my\\040cg rw - cgroup cgroup rw,memory,pids\n"
    found = cgroups.places(mounts, "8:memory,pids:/process_api/abc\n")
    assert found["memory"].path == Path("/mnt/my cg/abc") and found["pids"].path == Path("/mnt/my cg/abc")
    assert cgroups.places(mounts, "8:memory,pids:/elsewhere\n") == {}  # not shown by that mount


def test_v2_controllers_count_only_where_they_are_enabled_for_children(tmp_path):
    group = tmp_path / "kz.slice"
    group.mkdir()
    mounts = f"50 31 0:40 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
    (group / "cgroup.subtree_control").write_text("cpu io\n")
    assert cgroups.places(mounts, "0::/kz.slice\n") == {}  # not delegated: kz cannot use them
    (group / "cgroup.subtree_control").write_text("cpu memory pids\n")
    found = cgroups.places(mounts, "0::/kz.slice\n")
    assert found == {"memory": cgroups.Place("memory", 2, group), "pids": cgroups.Place("pids", 2, group)}
    # Never a group above kz's own: workers moved there would leave every limit and device
    # rule set on kz's group (a GPU machine's container gave CUDA error 304 to them).
    session = group / "session.scope"
    session.mkdir()
    (session / "cgroup.subtree_control").write_text("\n")
    assert cgroups.places(mounts, "0::/kz.slice/session.scope\n") == {}
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    assert cgroups.places(mounts, "0::/\n")["memory"].path == tmp_path  # the root group
    # A controller bound to a v1 hierarchy is taken from there, not from the unified one.
    both = cgroups.places(mounts + "39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n", "0::/kz.slice\n8:pids:/\n")
    assert both["pids"].version == 1 and both["memory"].version == 2


def test_no_cgroup_file_system_means_none():
    assert cgroups.places("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n", "0::/\n") == {}
    assert cgroups.probe({}) == ()


def test_support_reports_cgroups_and_their_absence():
    full = attrs.evolve(SUPPORT, cgroups=("memory", "pids"))
    assert "cgroup per worker (memory, pids)" in full.summary()
    assert not any("cgroup" in gap for gap in full.missing())
    off = full.without(["cgroups"])
    assert off.cgroups == () and "no cgroups" in off.summary()
    assert any("memory cgroup" in gap for gap in off.missing()) and any("pids cgroup" in gap for gap in off.missing())
    assert attrs.evolve(full, cgroups=["pids"]).cgroups == ("pids",)  # from the zygote's JSON


def test_each_role_gets_a_group_named_after_its_scratch_folder_with_its_limits(tmp_path):
    settings = SandboxSettings(scratch_root=tmp_path, processes=100, group_memory_bytes=3 << 30)
    full = attrs.evolve(SUPPORT, cgroups=("memory", "pids"))
    candidate = sandbox_spec("candidate", "cpu", tmp_path / "candidate-x", tmp_path / "log", {}, settings, full)
    assert candidate["cgroup"] == {"name": "candidate-x", "memory_bytes": 3 << 30, "tasks": 100}
    reference = sandbox_spec("reference", "cpu", tmp_path / "reference-y", tmp_path / "log", {}, settings, full)
    assert reference["cgroup"] == {"name": "reference-y", "memory_bytes": 3 << 30, "tasks": 400}
    pids_only = sandbox_spec("candidate", "cpu", tmp_path / "c", tmp_path / "log", {}, settings, attrs.evolve(full, cgroups=("pids",)))
    assert pids_only["cgroup"]["memory_bytes"] == 0 and pids_only["cgroup"]["tasks"] == 100
    assert sandbox_spec("candidate", "cpu", tmp_path / "c", tmp_path / "log", {}, settings, full.without(["cgroups"]))["cgroup"] is None


def test_a_workers_memory_limit_follows_the_config():
    gib = 1 << 30
    assert worker_memory_bytes(eval_config("eval.memory_limit_gb=4"), "cpu") == 6 * gib  # room for its memory file systems
    assert worker_memory_bytes(eval_config("eval.worker_memory_gb=1.5"), "cpu") == int(1.5 * gib)
    assert worker_memory_bytes(eval_config("eval.worker_memory_gb=-1"), "cpu") == 0
    half = worker_memory_bytes(eval_config(), "cuda:0")
    assert half > 0 and abs(half * 2 - os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) < 64 << 20


# -- the kernel enforcing the limits -------------------------------------------------------


def _run_in_group(tree: cgroups.Tree, name: str, memory_bytes: int, tasks: int, body) -> int:
    """Fork a child that enters ``name`` (as a worker's supervisor does) and runs ``body``;
    its exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 99
        try:
            tree.enter(name, memory_bytes, tasks)
            code = int(body())
        except BaseException:  # noqa: BLE001
            code = 98
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _fill_memory_files(total: int) -> int:
    """Write ``total`` bytes into memory files, none of them mapped (what ``RLIMIT_AS``
    never counted); 0 once all are written."""
    chunk, files = b"x" * (8 << 20), []
    for _ in range(total // (64 << 20)):
        fd = os.memfd_create("hold")
        for _ in range(8):
            os.write(fd, chunk)
        files.append(fd)
    return 0


@pytest.fixture
def tree():
    made = cgroups.Tree(SUPPORT.cgroups)
    yield made
    made.close()
    for root in made.roots.values():
        assert not root.exists(), "the tree's own folders were left"


@needs_memory
def test_a_worker_holding_memory_files_past_its_limit_is_ended_by_the_kernel(tree):
    """The version before: memory files were nobody's memory (the child below writes
    256 MiB of them and exits 0 without a memory limit); in a group of 96 MiB the kernel's
    OOM killer ends it, and the group says so."""
    assert _run_in_group(tree, "unlimited", 0, 0, lambda: _fill_memory_files(256 << 20)) == 0
    unlimited = tree.release("unlimited")
    assert unlimited.removed and unlimited.oom_kills == 0
    assert _run_in_group(tree, "bounded", 96 << 20, 0, lambda: _fill_memory_files(256 << 20)) == -signal.SIGKILL
    released = tree.release("bounded")
    assert released.removed and released.oom_kills >= 1 and 0 < released.memory_peak <= 96 << 20


@needs_pids
def test_a_workers_threads_and_processes_are_bounded_as_a_whole(tree):
    """The version before: a candidate mapped to the host's root started 3,000 threads in
    1.7 s. In a group of 20 tasks (plus the supervisor's own), threads and spawned processes
    past it fail in the worker."""
    import _thread
    import threading

    def flood() -> int:
        threading.stack_size(64 << 10)
        started = 0
        try:
            for _ in range(200):
                _thread.start_new_thread(time.sleep, (30,))
                started += 1
        except RuntimeError:
            pass
        spawned = 0
        try:
            for _ in range(200):
                os.posix_spawn("/bin/sleep", ["sleep", "30"], {})
                spawned += 1
        except OSError:
            pass
        return 10 + (started < 40) + 2 * (spawned < 40)

    assert _run_in_group(tree, "flood", 0, 20, flood) == 13
    assert tree.release("flood").removed  # the sleeps it left were killed with the group


@needs_pids
def test_what_a_worker_leaves_in_its_group_is_killed_when_the_group_is_released(tree):
    def leave_a_daemon() -> int:
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
        return 0

    assert _run_in_group(tree, "daemon", 0, 20, leave_a_daemon) == 0
    folder = tree.roots["pids"] / "daemon"
    [daemon] = [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    assert tree.release("daemon").removed
    time.sleep(0.05)
    assert not Path(f"/proc/{daemon}").exists() or "Z" in Path(f"/proc/{daemon}/stat").read_text().rsplit(")", 1)[1].split()[0]


# -- in kz eval ------------------------------------------------------------------------------

HOG = '''
import os


def _hold_memory_files():
    # 1.5 GiB in memory files of 192 MiB, none mapped: no address space, under RLIMIT_FSIZE.
    chunk = b"x" * (8 << 20)
    held = []
    for _ in range(8):
        fd = os.memfd_create("hold")
        for _ in range(24):
            os.write(fd, chunk)
        held.append(fd)
    return held


_HELD = _hold_memory_files()
'''


@pytest.mark.triton
@pytest.mark.parametrize("cgroups_on", [True, False], ids=["cgroups", "no-cgroups"])
def test_a_candidate_holding_memory_past_its_workers_limit_is_ended_and_its_neighbour_is_not(example_problems, cgroups_on):
    """Red-team round 26d in ``kz eval``: a correct kernel whose module first holds 1.5 GiB
    in memory files. With a cgroup per worker of 1 GiB, the kernel ends its worker and its
    result says why; its honest neighbour is correct. Where the machine gives no cgroups
    (here, turned off), the memory is not bounded, as ``kz eval`` reports; the candidate is
    judged on its kernel."""
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate, Verdict

    if cgroups_on and "memory" not in SUPPORT.cgroups:
        pytest.skip("no memory cgroup kz can make here")
    honest = (Path(__file__).parents[2] / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
    hog = honest.replace("class ModelNew", HOG + "\n\nclass ModelNew", 1)
    config = eval_config("eval.worker_memory_gb=1", "eval.timing=false", *([] if cgroups_on else ["eval.isolation_off=[cgroups]"]))
    with Evaluator(example_problems, config) as evaluator:
        assert ("cgroup per worker" in evaluator._zygote.support.summary()) is cgroups_on
        results = {r.sample_id: r for r in evaluator.evaluate([Candidate("1_vector_add", "triton", hog, "hog"), Candidate("1_vector_add", "triton", honest, "honest")])}
        zygote = evaluator._zygote.process.pid
    assert results["honest"].verdict is Verdict.CORRECT, results["honest"].message
    if cgroups_on:
        assert results["hog"].verdict is Verdict.RUNTIME_ERROR and "went over its memory limit (1 GiB" in results["hog"].message, results["hog"].message
        for place in cgroups.places().values():
            assert not (place.path / f"{cgroups.PREFIX}{zygote}").exists(), "the zygote left its groups"
    else:
        assert results["hog"].verdict is Verdict.CORRECT, results["hog"].message


STREAMS_A_REPLY = '''
import json
import os
import socket
import struct


def _stream_a_reply(size):
    # One frame of a uint8 "tensor" of `size` bytes, written on the worker's own socket
    # while the parent waits for its load reply; it holds 16 MiB of its own.
    sock = socket.socket(fileno=3)
    header = json.dumps({"__tensor__": 0, "dtype": "uint8", "shape": [size]}).encode()
    prefix = struct.pack(">Q", len(header)) + header + struct.pack(">Q", 1) + struct.pack(">Q", size)
    sock.sendall(struct.pack(">Q", len(prefix) + size) + prefix)
    chunk = memoryview(bytearray(16 << 20))
    left = size
    while left > 0:
        sock.sendall(chunk[: min(left, len(chunk))])
        left -= min(left, len(chunk))
    os._exit(0)


_stream_a_reply(1536 << 20)
'''


@pytest.mark.triton
@needs_memory
def test_a_reply_larger_than_the_workers_memory_is_refused_before_the_parent_holds_it(example_problems):
    """Red-team round 27: a candidate whose group held 32 MiB streamed a 2.5 GiB reply and
    the parent peaked at 5.4 GB (the frame, and a copy of each tensor's bytes), charged to
    no group; two at once ended a parent held to 3 GiB. A worker cannot have held more than
    its group's memory to reply with, so a candidate's reply is bounded by it (and tensors
    are views of the frame, not copies)."""
    import resource

    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate, Verdict

    honest = (Path(__file__).parents[2] / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
    streamer = honest.replace("class ModelNew", STREAMS_A_REPLY + "\n\nclass ModelNew", 1)
    config = eval_config("eval.worker_memory_gb=1", "eval.timing=false")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Evaluator(example_problems, config) as evaluator:
        results = {r.sample_id: r for r in evaluator.evaluate([Candidate("1_vector_add", "triton", streamer, "streamer"), Candidate("1_vector_add", "triton", honest, "honest")])}
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert results["honest"].verdict is Verdict.CORRECT, results["honest"].message
    assert results["streamer"].verdict is not Verdict.CORRECT and "worker_died" in results["streamer"].message, results["streamer"].message
    assert grown < 512 << 20, f"the parent grew by {grown >> 20} MiB"


def test_a_supervisor_given_an_ended_ones_process_id_is_not_taken_for_it():
    """Red-team round 27: the zygote kept how ended supervisors ended, by process id, and a
    new supervisor given such an id (a candidate can churn 14,000 ids a second) read as
    ended, with the old one's exit status and memory-limit kill: an honest worker was told
    it had gone over its memory limit. A live supervisor is running, whatever an earlier
    process of its id left (and a fork forgets it)."""
    import socket

    from kz_core.evaluate.zygote import Zygote

    control, other = socket.socketpair()
    zygote = Zygote(control)
    try:
        pid = os.getpid()  # stands for a reused id: any id of a live process
        zygote.ended[pid], zygote.released[pid] = 137, cgroups.Released(True, 1, 1 << 30)
        assert zygote.status(pid)["exit"] == 137 and zygote.status(pid)["oom_kills"] == 1
        zygote.live.add(pid)
        assert zygote.status(pid) == {"ok": True, "running": True, "exit": None}
    finally:
        control.close()
        other.close()


@pytest.mark.triton
@needs_memory
def test_replies_in_flight_together_are_bounded_by_the_reply_budget_not_their_sum(example_problems):
    """What was open after round 27: each reply was bounded by its worker's group memory,
    not their sum, so several workers streaming large replies at once made the parent hold
    them all. With ``eval.reply_memory_gb``, replies past the budget are received into a
    file; the honest neighbour is correct."""
    import gc

    from kz_core.evaluate import Evaluator, wire
    from kz_core.model import Candidate, Verdict

    honest = (Path(__file__).parents[2] / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
    streamer = honest.replace("class ModelNew", STREAMS_A_REPLY.replace("1536 << 20", "400 << 20") + "\n\nclass ModelNew", 1)
    config = eval_config("eval.worker_memory_gb=1", "eval.reply_memory_gb=0.25", "eval.timing=false", "eval.workers=2")
    spilled = wire.REPLY_MEMORY.spilled
    try:
        with Evaluator(example_problems, config) as evaluator:
            candidates = [Candidate("1_vector_add", "triton", streamer, f"streamer{i}") for i in range(2)]
            results = {r.sample_id: r for r in evaluator.evaluate([*candidates, Candidate("1_vector_add", "triton", honest, "honest")])}
            assert wire.REPLY_MEMORY.budget_bytes == 256 << 20
    finally:
        wire.configure_reply_memory()
    assert results["honest"].verdict is Verdict.CORRECT, results["honest"].message
    assert all(results[f"streamer{i}"].verdict is not Verdict.CORRECT for i in range(2))
    assert wire.REPLY_MEMORY.spilled >= spilled + 2  # neither 400 MiB reply fit a 256 MiB budget
    gc.collect()
    assert wire.REPLY_MEMORY.held == 0


def test_the_workers_common_memory_limit_follows_the_config():
    """``eval.workers_memory_gb``: by default the machine's memory less a quarter of it,
    at most 16 GiB kept back for kz itself and the rest of the machine."""
    from kz_core.evaluate.sandbox import machine_memory_bytes, workers_memory_bytes

    gib, total = 1 << 30, machine_memory_bytes()
    assert workers_memory_bytes(eval_config()) == total - min(total // 4, 16 * gib) > 0
    assert workers_memory_bytes(eval_config("eval.workers_memory_gb=3")) == 3 * gib
    assert workers_memory_bytes(eval_config("eval.workers_memory_gb=-1")) == 0


COLLUDER = '''
import time as _time

# 700 MiB of its own, written (resident), well under its worker's limit of 1.5 GiB; held
# long enough that its sibling's is held too.
_HELD = b"x" * (700 << 20)
_time.sleep(8)
'''


@pytest.mark.triton
@needs_memory
@pytest.mark.parametrize("common_limit", [True, False], ids=["common-limit", "before"])
def test_candidates_each_under_their_own_limit_are_bounded_together(example_problems, common_limit):
    """What was open after round 27: each worker's memory was bounded, not their sum, so
    the candidates of one batch (a GRPO group is written by one policy) could each stay
    under their own limit and together take the machine's memory, and the kernel's OOM
    killer would choose among all its processes, kz's own included. The version before:
    two such candidates held 1.4 GiB together and both were correct. With the workers'
    common limit (``eval.workers_memory_gb``, here 1.2 GiB) the kernel ends a worker of
    theirs, never kz's; the one ended is evaluated once more, alone (its neighbours' memory
    may have been the cause; alone, each fits), and its honest neighbour is correct."""
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate, Verdict

    honest = (Path(__file__).parents[2] / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
    colluder = honest.replace("class ModelNew", COLLUDER + "\n\nclass ModelNew", 1)
    limit = "eval.workers_memory_gb=1.2" if common_limit else "eval.workers_memory_gb=-1"
    config = eval_config("eval.workers=3", "eval.worker_memory_gb=1.5", limit, "eval.timing=false")
    candidates = [Candidate("1_vector_add", "triton", colluder, f"colluder{i}") for i in range(2)]
    with Evaluator(example_problems, config) as evaluator:
        root = cgroups.places()["memory"].path / f"{cgroups.PREFIX}{evaluator._zygote.process.pid}"
        limit_file = "memory.limit_in_bytes" if cgroups.places()["memory"].version == 1 else "memory.max"
        set_limit = (root / limit_file).read_text().strip()
        summary = evaluator._zygote.support.summary()
        assert ("workers' memory together at most 1.2 GiB" in summary) is common_limit, summary
        results = {r.sample_id: r for r in evaluator.evaluate([*candidates, Candidate("1_vector_add", "triton", honest, "honest")])}
    assert results["honest"].verdict is Verdict.CORRECT, results["honest"].message
    colluders = [results[f"colluder{i}"] for i in range(2)]
    again = [r for r in colluders if any(f.check == "host_memory" for f in r.findings)]
    if common_limit:
        assert abs(int(set_limit) - int(1.2 * (1 << 30))) < 1 << 16  # the kernel rounds it to pages
        assert again, [r.message for r in colluders]  # a worker of theirs was ended and evaluated again
        # ... alone, where each fits: judged on its kernel, as its neighbours are
        assert all(r.verdict is Verdict.CORRECT for r in colluders), [r.message for r in colluders]
    else:
        assert not again and all(r.verdict is Verdict.CORRECT for r in colluders), [r.message for r in colluders]
