"""benchmarks/floor.py: the GPU floor of an evaluation pass, stage by stage."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from floor import candidate_floor, floor_table, pass_floor  # noqa: E402


def result(problem, median_ms=2.0, eager_ms=4.0, timed_calls=40, unseen_calls=4, eager_calls=20, **stages):
    return {
        "problem": problem,
        "verdict": "correct",
        "eager_ms": eager_ms,
        "median_ms": median_ms,
        "unseen_ms": median_ms * 1.5 if median_ms else None,
        "timed_calls": timed_calls,
        "unseen_calls": unseen_calls,
        "eager_calls": eager_calls,
        "stages_s": {"reference_s": 1.0, "correctness_s": 2.0, "timing_s": 3.0, "baseline_s": 0.5, **stages},
    }


def test_a_candidate_s_floor_is_its_calls_times_one_call():
    floors = candidate_floor(result("a"), trials=5, variation=True, first_of_problem=True)
    # reference: 5 trials + 2 timing + 2 unseen + the variation, at the eager time
    assert floors["reference"] == pytest.approx(10 * 4.0e-3)
    assert floors["correctness"] == pytest.approx(6 * 2.0e-3)
    assert floors["timing"] == pytest.approx((40 * 2.0 + 4 * 3.0) * 1e-3)
    assert floors["baseline"] == pytest.approx(20 * 4.0e-3)
    later = candidate_floor(result("a"), trials=5, variation=False, first_of_problem=False)
    assert later["reference"] == later["baseline"] == 0.0  # kept from the first candidate
    assert later["correctness"] == pytest.approx(5 * 2.0e-3)


def test_a_candidate_without_its_times_is_left_out():
    assert candidate_floor(result("a", median_ms=None), 5, True, True) is None
    assert candidate_floor(result("a", eager_ms=None), 5, True, True) is None
    assert candidate_floor(result("a", timed_calls=None), 5, True, True) is None


def test_a_pass_pays_each_problem_s_reference_and_baseline_once():
    results = [result("a"), result("a"), result("b", median_ms=None)]
    report = pass_floor(results, trials=5, variation=True)
    assert report["counted"] == 2 and report["left_out"] == 1
    stages = report["stages"]
    assert stages["reference"]["floor_s"] == pytest.approx(0.04)
    assert stages["baseline"]["floor_s"] == pytest.approx(0.08)
    assert stages["timing"]["floor_s"] == pytest.approx(2 * 0.092)
    assert stages["timing"]["measured_s"] == pytest.approx(6.0)  # both counted candidates'
    total = 0.04 + 0.08 + 2 * 0.012 + 2 * 0.092
    assert report["floor_s"] == pytest.approx(total, abs=0.01)
    assert report["most_per_minute"] == pytest.approx(60 * 2 / report["floor_s"], rel=0.01)
    table = floor_table(report, seconds=12.0)
    assert "| timing | 6.0 | 0.2 | 32.6x |" in table
    assert "at most" in table and "the pass took 12.0 s" in table


def test_no_candidate_timed_says_so():
    report = pass_floor([result("a", eager_ms=None)], trials=5, variation=True)
    assert report["most_per_minute"] is None
    assert "No candidate had the times" in floor_table(report, 1.0)
