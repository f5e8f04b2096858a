"""One evaluation that mixes a cheat of every attack class with honest victims.

Every cheat must be judged anything but correct, every honest victim correct (the
victims come after the cheats in the same small pool, so a worker reused after a cheat
would show it), the batch must finish with one result per candidate, no process may be
left behind, the parent's memory must not grow with a cheat's gigabyte output, the run's
journal and the cache must be as kz wrote them, and no secret of the parent's environment
may reach candidate code. Run once with every isolation mechanism the machine has, and
once with none of them (what a machine without Landlock, seccomp and namespaces gives):
the trusted executor keeps the verdicts right either way, and processes are still found.
"""

from __future__ import annotations

import resource
import sqlite3
from pathlib import Path

import attrs
import pytest

from kz_core.evaluate import Evaluator
from kz_core.evaluate.journal import Journal
from kz_core.model import Candidate, Verdict

from .conftest import EXAMPLE_CANDIDATES, cheat_candidate, cheat_header, cheat_needs_met, cheat_paths, eval_config
from .test_sandbox import RUN_DIGITS, in_forward, live_marked_processes, processes_running

#: These tests evaluate Triton kernels: without kz-backend-triton they skip (tests/conftest.py).
pytestmark = pytest.mark.triton

GOOD = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()
#: Right only where the parent's token cannot be read: from the environment, or from the
#: environment of any other process (the parent's through /proc/<ppid>/environ).
TOKEN_PROBE = in_forward(
    "import os\n"
    "seen = 'kz_secret_token' in str(os.environ)\n"
    "for pid in os.listdir('/proc'):\n"
    "    try:\n"
    "        seen = seen or b'kz_secret_token' in open(f'/proc/{pid}/environ', 'rb').read()\n"
    "    except (OSError, ValueError):\n"
    "        pass\n"
    "if seen:\n"
    "    return a * 0"
)

#: Right only where no file a cheat planted in /dev/shm (tests/cheats/triton/dev_shm_counters.py)
#: can be seen.
SHM_PROBE = in_forward("if __import__('os').path.exists('/dev/shm/kz_planted_by_dev_shm_counters'):\n    return a * 0")


def unique_sleepers(candidate: Candidate) -> Candidate:
    """The orphan cheat's sleepers with digits of this run, so that another copy of the
    suite running beside this one cannot be mistaken for a survivor."""
    code = candidate.code.replace("4242.4242", f"4242.{RUN_DIGITS}").replace("4243.4243", f"4243.{RUN_DIGITS}")
    return attrs.evolve(candidate, code=code)


def hostile_candidates(isolated: bool) -> list[Candidate]:
    """Every CPU cheat (each class at least twice), then honest victims of every example.

    Without isolation, cheats marked ``destructive`` are left out: they would really harm
    the machine (kill every process of the user, plant files in site-packages, rewrite
    SQLite files in the user's home), which is what the sandbox exists to prevent, and so
    is the probe for the parent's token in /proc.
    """
    cheats = [
        unique_sleepers(cheat_candidate(p))
        for p in cheat_paths()
        if cheat_header(p)["gpu_only"] != "true" and cheat_header(p)["backend"] == "triton" and (isolated or cheat_header(p).get("destructive") != "true") and cheat_needs_met(p)
    ]
    victims = [
        Candidate(path.stem, "triton", path.read_text(), sample_id=f"victim-{path.stem}-{round}")
        for round in range(2)
        for path in sorted((EXAMPLE_CANDIDATES / "triton").glob("*.py"))
    ]
    probes = [Candidate("1_vector_add", "triton", TOKEN_PROBE, sample_id="victim-token"), Candidate("1_vector_add", "triton", SHM_PROBE, sample_id="victim-shm")]
    return cheats + victims + (probes if isolated else [])


def test_every_class_has_at_least_two_cheats():
    classes: dict[str, int] = {}
    for path in cheat_paths():
        header = cheat_header(path)
        if "class" in header:
            classes[header["class"]] = classes.get(header["class"], 0) + 1
    assert all(classes.get(str(number), 0) >= 2 for number in range(1, 9)), classes


@pytest.mark.parametrize("isolation_off", ["[]", "[landlock,seccomp,namespaces]"], ids=["isolated", "no-isolation"])
@pytest.mark.slow
def test_a_hostile_batch(example_problems, tmp_path, monkeypatch, isolation_off):
    monkeypatch.setenv("HF_TOKEN", "kz_secret_token")
    cache = tmp_path / "cache"
    monkeypatch.setenv("KZ_CACHE_DIR", str(cache))
    journal_path = tmp_path / "run" / "journal.sqlite"
    candidates = hostile_candidates(isolated=isolation_off == "[]")
    config = eval_config("eval.run_timeout_s=30", "eval.compile_timeout_s=30", "eval.workers=2", f"eval.isolation_off={isolation_off}")
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with Journal(journal_path) as journal, Evaluator(example_problems, config, journal=journal) as evaluator:
        results = evaluator.evaluate(candidates)
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert [r.sample_id for r in results] == [c.sample_id for c in candidates], "the batch did not finish whole"
    by_id = {r.sample_id: r for r in results}
    wrong = [f"{c.sample_id}: {by_id[c.sample_id].message}" for c in candidates if not c.sample_id.startswith("victim") and by_id[c.sample_id].verdict is Verdict.CORRECT]
    assert not wrong, f"cheats judged correct: {wrong}"
    hurt = [f"{c.sample_id}: {by_id[c.sample_id].message}" for c in candidates if c.sample_id.startswith("victim") and by_id[c.sample_id].verdict is not Verdict.CORRECT]
    assert not hurt, f"honest victims not judged correct: {hurt}"
    # No process of the batch is left: marked (workers and the zygote carry this process's
    # marker; other kz processes' do not count) or not, in a session of its own or not.
    assert live_marked_processes() == []
    assert processes_running(f"4242.{RUN_DIGITS}".encode()) == [] and processes_running(f"4243.{RUN_DIGITS}".encode()) == []
    # The 1 GiB output never reached the parent (ru_maxrss is in KiB).
    assert peak_after - peak_before < 512 * 1024, f"the parent grew by {(peak_after - peak_before) >> 10} MiB"
    # The journal, read back by kz, holds no trigger and gives the same verdicts back.
    with Journal(journal_path) as journal:
        stored = {r.sample_id: r.verdict for r in journal.results()}
    with sqlite3.connect(journal_path) as db:
        assert db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone()[0] == 0
    assert all(stored.get(c.sample_id) is by_id[c.sample_id].verdict for c in candidates if c.sample_id in stored)
    planted = [p for p in cache.rglob("*") if "0" * 64 in p.name or p.name == "planted"]
    assert planted == [], f"files planted in the cache: {planted}"
    if isolation_off == "[]":
        assert not Path("/dev/shm/kz_planted_by_dev_shm_counters").exists(), "a cheat left a file in the machine's /dev/shm"


def test_isolation_is_reported(example_problems, tmp_path):
    from kz_core.evaluate.isolation import support

    with Evaluator(example_problems, eval_config("eval.isolation_off=[seccomp]")) as evaluator:
        result = evaluator.evaluate([Candidate("1_vector_add", "triton", GOOD)])[0]
    assert result.verdict is Verdict.CORRECT, result.message
    assert "no seccomp" in result.environment.isolation
    if support().landlock_abi:
        assert f"Landlock ABI {support().landlock_abi}" in result.environment.isolation
    with pytest.raises(Exception, match="unknown isolation mechanism"):
        Evaluator(example_problems, eval_config("eval.isolation_off=[selinux]", f"eval.scratch_dir={tmp_path}"))
    assert list(tmp_path.iterdir()) == []  # no scratch folder (nor zygote) left behind: the version before left both


def test_the_sandbox_keeps_the_parents_files_out_of_reach(example_problems, tmp_path, monkeypatch):
    """A candidate cannot read a file of the caller's, nor write beside it (with Landlock);
    nor leave a file in the machine's /dev/shm (a tmpfs: a file left there outlives the
    run and holds the machine's memory; before, the cheat poison_shared_files left its
    sitecustomize.py there): its /dev/shm is a memory file system of its own, or not writable."""
    import uuid

    from kz_core.evaluate.isolation import support

    if not support().landlock_abi:
        pytest.skip("this kernel has no Landlock")
    secret = tmp_path / "secret.txt"
    secret.write_text("kz secret")
    shm = Path("/dev/shm") / f"kz-probe-{uuid.uuid4().hex}"
    probe = in_forward(
        "readable = writable = False\n"
        "try:\n"
        f"    readable = 'kz secret' in open({str(secret)!r}).read()\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        f"    open({str(tmp_path / 'planted.txt')!r}, 'w').write('x')\n"
        "    writable = True\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        f"    open({str(shm)!r}, 'w').write('x')\n"
        "except OSError:\n"
        "    pass\n"
        "if readable or writable:\n"
        "    return a * 0"
    )
    try:
        with Evaluator(example_problems, eval_config()) as evaluator:
            result = evaluator.evaluate([Candidate("1_vector_add", "triton", probe)])[0]
        assert result.verdict is Verdict.CORRECT, f"the candidate reached the caller's files: {result.message}"
        assert not (tmp_path / "planted.txt").exists() and not shm.exists()
    finally:
        shm.unlink(missing_ok=True)
    assert Path(secret).read_text() == "kz secret"


def test_each_candidate_has_a_dev_shm_of_its_own(example_problems):
    """Where namespaces allow, a candidate's /dev/shm is a memory file system of its own: it can use it
    (Python's multiprocessing keeps its semaphores there; on a GPU torch's CUDA IPC keeps
    its counts there), and a file it leaves is seen neither by the candidate after it
    nor in the machine's /dev/shm. Before, every sandboxed process of a GPU run shared the
    machine's /dev/shm and could rewrite the counts other workers' shared outputs hang on."""
    import uuid

    from kz_core.evaluate.isolation import support

    if not (support().pid_namespace and support().private_shm):
        pytest.skip("no private /dev/shm here (the sandbox reports it)")
    name = f"kz-left-{uuid.uuid4().hex}"
    leaves = in_forward(
        "import multiprocessing\n"
        "lock = multiprocessing.Lock()\n"  # a POSIX semaphore in /dev/shm
        "with lock:\n"
        f"    open('/dev/shm/{name}', 'w').write('planted')\n"
    )
    looks = in_forward(f"if __import__('os').path.exists('/dev/shm/{name}'):\n    return a * 0")
    try:
        with Evaluator(example_problems, eval_config()) as evaluator:
            first = evaluator.evaluate([Candidate("1_vector_add", "triton", leaves, sample_id="leaves")])[0]
            second = evaluator.evaluate([Candidate("1_vector_add", "triton", looks, sample_id="looks")])[0]
        assert first.verdict is Verdict.CORRECT, f"a candidate could not use its /dev/shm: {first.message}"
        assert second.verdict is Verdict.CORRECT, f"a later candidate saw what an earlier one left in /dev/shm: {second.message}"
        assert not (Path("/dev/shm") / name).exists()
    finally:
        (Path("/dev/shm") / name).unlink(missing_ok=True)


def test_a_failure_inside_kz_is_that_candidates_result_not_the_batchs():
    """Red-team round 26b ended whole batches through failures nobody had foreseen (a reply
    that broke the decoder, a folder tree too deep to remove): the exception reached
    ``evaluate``, which re-raised it, and no candidate had a result. Now the candidate whose
    evaluation failed gets ``not_run`` (never journaled) and the others their verdicts."""
    import types

    from kz_core.evaluate.evaluator import EvaluatorError
    from kz_core.evaluate.sandbox import WorkerStartError

    def evaluate(candidate, compile_only=False):
        if candidate.sample_id == 1:
            raise RecursionError("maximum recursion depth exceeded")
        if candidate.sample_id == 2:
            raise EvaluatorError("the evaluator itself cannot work")
        if candidate.sample_id == 3:  # as every reference worker on the GPU machine did (thirty-seventh session)
            raise WorkerStartError("a reference worker on cuda:0 did not start: RuntimeError: Error 304")
        return "judged"

    fake = types.SimpleNamespace(_evaluate=evaluate, problems={})
    fake._finish = types.MethodType(Evaluator._finish, fake)
    guarded = types.MethodType(Evaluator._guarded, fake)
    assert guarded(Candidate(problem="p", code="", backend="triton", sample_id=0)) == "judged"
    failed = guarded(Candidate(problem="p", code="", backend="triton", sample_id=1))
    assert failed.verdict is Verdict.RUNTIME_ERROR and [f.check for f in failed.findings] == ["not_run"]
    assert "RecursionError" in failed.message
    with pytest.raises(EvaluatorError):
        guarded(Candidate(problem="p", code="", backend="triton", sample_id=2))
    unstarted = guarded(Candidate(problem="p", code="", backend="triton", sample_id=3))
    assert [f.check for f in unstarted.findings] == ["not_run"] and "Error 304" in unstarted.message
    assert "eval.isolation_off" in unstarted.message and "kz bug" not in unstarted.message  # what to do, not a bug report
