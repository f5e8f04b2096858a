"""The journal keeps every result, across re-opening, keyed by content."""

from __future__ import annotations

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
