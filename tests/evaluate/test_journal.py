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
