"""The journal keeps every result, across re-opening, keyed by content."""

from __future__ import annotations

import pytest

from kz_core.evaluate.journal import BaselineCache, Journal, result_key
from kz_core.model import EvalResult, RuntimeStats, Verdict


def test_results_survive_reopening(tmp_path):
    path = tmp_path / "journal.sqlite"
    result = EvalResult("p", "3", "triton", Verdict.CORRECT, speedups={"eager": 1.5})
    with Journal(path) as journal:
        journal.put(result_key("a", "b"), result)
        assert journal.get(result_key("a", "b")) == result
        assert journal.get(result_key("a", "c")) is None
    with Journal(path) as journal:
        assert journal.results() == [result] and len(journal) == 1


def test_keys_depend_on_every_part():
    assert result_key("a", "b") != result_key("a", "c") != result_key("ab", "")
    assert result_key("a", "b") == result_key("a", "b")


def test_baseline_cache(tmp_path):
    stats = RuntimeStats(1.0, 0.01, 0.9, 20, "cuda_events")
    with BaselineCache(tmp_path / "b.sqlite") as cache:
        cache.put("k", stats)
    with BaselineCache(tmp_path / "b.sqlite") as cache:
        assert cache.get("k") == stats and cache.get("other") is None


def test_processes_that_create_the_row_key_together_agree_on_it(tmp_path):
    """Rows signed by processes that found no key and made one at the same moment must
    all check against the key left on disk."""
    import os
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from kz_core.store import row_mac\n"
        "while time.time() < float(sys.argv[1]): pass\n"
        "print(row_mac('row'))\n"
    )
    env = {**os.environ, "KZ_CACHE_DIR": str(tmp_path / "cache")}
    import time

    start = str(time.time() + 3)
    procs = [subprocess.Popen([sys.executable, "-c", script, start], stdout=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    macs = {p.communicate(timeout=120)[0].strip() for p in procs}
    check = subprocess.run([sys.executable, "-c", "from kz_core.store import row_mac; print(row_mac('row'))"], capture_output=True, text=True, env=env)
    assert len(macs) == 1 and macs == {check.stdout.strip()}
    assert [p.name for p in (tmp_path / "cache").iterdir() if "rows.key" in p.name] == ["rows.key"]


def test_connections_that_open_a_new_journal_together_all_get_it(tmp_path):
    """The training processes of one run open its journal at the same moment. Switching a
    new file to write-ahead logging takes an exclusive lock, and SQLite refuses it at once
    (without waiting) to all but one of the connections that want it together; they must
    try again, not fail. Threads race as processes do (SQLite locks per connection); a few
    hundred new files make the race happen."""
    import threading

    failures: list[BaseException] = []
    for index in range(300):
        path = tmp_path / f"journal-{index}.sqlite"
        start = threading.Barrier(4)

        def open_and_write(path=path, start=start) -> None:
            start.wait()
            try:
                with Journal(path) as journal:
                    journal.put(result_key(threading.current_thread().name), EvalResult("p", "0", "triton", Verdict.CORRECT))
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                failures.append(exc)

        threads = [threading.Thread(target=open_and_write, name=f"t{n}") for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    with Journal(tmp_path / "journal-299.sqlite") as journal:
        assert len(journal) == 4


@pytest.mark.triton
def test_a_failure_that_is_not_the_candidates_is_not_journaled(tmp_path):
    """A missing backend plugin (or toolchain, or a reference that failed) says nothing
    about the candidate: a re-run after fixing it must evaluate again, not read 0/N back."""
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate
    from kz_core.problems import load_problems

    from .conftest import EXAMPLE_CANDIDATES, eval_config

    code = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()
    good, missing = Candidate("1_vector_add", "triton", code, "good"), Candidate("1_vector_add", "nobody", code, "missing")
    with Journal(tmp_path / "journal.sqlite") as journal:
        with Evaluator(load_problems("examples").problems, eval_config("eval.cache=true"), journal=journal) as evaluator:
            ok, unknown = evaluator.evaluate([good, missing])
            assert ok.verdict is Verdict.CORRECT, ok.message
            assert unknown.verdict is Verdict.RUNTIME_ERROR and unknown.message.startswith("runtime_error: unknown_backend: no installed plugin provides backend 'nobody'")
            assert journal.get(evaluator.journal_key(good)) is not None
            assert journal.get(evaluator.journal_key(missing)) is None


def test_the_verdict_is_not_repeated_in_the_message():
    from kz_core.evaluate.judge import summary_message
    from kz_core.model import Finding

    assert summary_message(Verdict.COMPILE_ERROR, [Finding("compile_error", "line 3: bad")]) == "compile_error: line 3: bad"
    assert summary_message(Verdict.REJECTED, [Finding("no_kernel_launch", "no kernel ran")]) == "rejected: no_kernel_launch: no kernel ran"


@pytest.mark.triton
def test_a_static_check_that_crashes_fails_its_candidate_not_the_batch(register_plugin, tmp_path):
    from kz_core import hookimpl
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate
    from kz_core.problems import load_problems

    from .conftest import EXAMPLE_CANDIDATES, eval_config

    class Fragile:
        @hookimpl
        def static_checks(self, candidate, problem):
            if candidate.sample_id == "unlucky":
                raise SystemError("AST constructor recursion depth mismatch")
            return []

    register_plugin(Fragile(), "fragile")
    code = (EXAMPLE_CANDIDATES / "triton" / "1_vector_add.py").read_text()
    with Journal(tmp_path / "journal.sqlite") as journal:
        with Evaluator(load_problems("examples").problems, eval_config("eval.cache=true"), journal=journal) as evaluator:
            unlucky, fine = evaluator.evaluate([Candidate("1_vector_add", "triton", code, "unlucky"), Candidate("1_vector_add", "triton", code, "fine")])
            assert fine.verdict is Verdict.CORRECT, fine.message
            assert unlucky.verdict is Verdict.RUNTIME_ERROR and "a static check failed (SystemError" in unlucky.message
