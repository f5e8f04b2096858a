"""pass@k, fast_p, geometric-mean speedup and summaries (kz_core/metrics.py).

Properties (hypothesis) pin the mathematical contracts; examples pin known values, the
"not measured" reporting of CPU runs, and the error messages.
"""

from __future__ import annotations

import json
import math
import pickle
import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kz_core.metrics import (
    COMPILE,
    EAGER,
    PassAtK,
    Summary,
    fast_p,
    format_summary,
    geometric_mean_speedup,
    pass_at_k,
    summarize,
)
from kz_core.model import EvalResult, RuntimeStats, Verdict
from kz_core.serialization import dumps, from_json_dict, loads, to_json_dict


def result(
    verdict: Verdict = Verdict.CORRECT,
    problem: str = "p",
    sample_id: str = "0",
    **speedups: float,
) -> EvalResult:
    return EvalResult(problem=problem, sample_id=sample_id, backend="triton", verdict=verdict, speedups=dict(speedups))


def cpu_result(verdict: Verdict = Verdict.CORRECT, problem: str = "p", sample_id: str = "0") -> EvalResult:
    cpu = RuntimeStats(median_ms=3.0, iqr_ms=0.1, min_ms=2.9, trials=10, clock="cpu")
    return EvalResult(
        problem=problem, sample_id=sample_id, backend="triton", verdict=verdict, runtime=cpu, baselines={EAGER: cpu}
    )


# n >= 1 samples, c correct, k in 1..n.
@st.composite
def n_c_k(draw, max_n: int = 200) -> tuple[int, int, int]:
    n = draw(st.integers(min_value=1, max_value=max_n))
    c = draw(st.integers(min_value=0, max_value=n))
    k = draw(st.integers(min_value=1, max_value=n))
    return n, c, k


speedup_values = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)
verdicts = st.sampled_from(Verdict)


@st.composite
def eval_results(draw, problems: tuple[str, ...] = ("a", "b", "c")) -> EvalResult:
    """A result with any verdict and, sometimes, speedups against eager and compile."""
    speedups = {}
    for baseline in (EAGER, COMPILE):
        if draw(st.booleans()):
            speedups[baseline] = draw(speedup_values)
    return EvalResult(
        problem=draw(st.sampled_from(problems)),
        sample_id=str(draw(st.integers(0, 99))),
        backend="triton",
        verdict=draw(verdicts),
        speedups=speedups,
    )


result_lists = st.lists(eval_results(), min_size=1, max_size=40)


# ---------------------------------------------------------------------------------------
# pass@k: properties
# ---------------------------------------------------------------------------------------


@given(n_c_k())
def test_pass_at_k_is_a_probability(args):
    assert 0.0 <= pass_at_k(*args) <= 1.0


@given(n_c_k())
def test_pass_at_k_is_non_decreasing_in_c(args):
    n, c, k = args
    assume(c < n)
    assert pass_at_k(n, c, k) <= pass_at_k(n, c + 1, k)


@given(n_c_k())
def test_pass_at_k_is_non_decreasing_in_k(args):
    n, c, k = args
    assume(k < n)
    assert pass_at_k(n, c, k) <= pass_at_k(n, c, k + 1)


@given(n_c_k(max_n=1000))
def test_pass_at_1_is_the_fraction_correct(args):
    n, c, _ = args
    assert pass_at_k(n, c, 1) == pytest.approx(c / n, rel=1e-12, abs=1e-12)


@given(n_c_k(max_n=60))
def test_pass_at_k_equals_the_combinatorial_definition(args):
    n, c, k = args
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-9, abs=1e-12)


@given(n_c_k())
def test_pass_at_k_is_zero_without_and_one_with_enough_correct(args):
    n, c, k = args
    assert pass_at_k(n, 0, k) == 0.0
    if n - c < k:
        assert pass_at_k(n, c, k) == 1.0


# ---------------------------------------------------------------------------------------
# pass@k: examples and errors
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (10, 3, 1, 0.3),
        (4, 2, 2, 1 - 1 / 6),  # C(2,2)/C(4,2) = 1/6
        (10, 1, 5, 0.5),  # one correct sample among 10, 5 draws: 5/10
        (200, 7, 200, 1.0),
        (10, 8, 3, 1.0),  # only 2 incorrect: every draw of 3 holds a correct one
    ],
)
def test_pass_at_k_known_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (5, 2, 0, "k must be at least 1, got k=0"),
        (5, 2, -1, "k must be at least 1"),
        (3, 1, 5, "k cannot exceed n (samples), got k=5 > n=3"),
        (0, 0, 1, "k cannot exceed n (samples), got k=1 > n=0"),
        (3, 4, 1, "c (correct samples) cannot exceed n (samples), got c=4 > n=3"),
        (-1, 0, 1, "must be non-negative, got n=-1, c=0"),
        (5, -2, 1, "must be non-negative, got n=5, c=-2"),
    ],
)
def test_pass_at_k_rejects_invalid_arguments(n, c, k, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        pass_at_k(n, c, k)


def test_pass_at_k_rejects_non_integers():
    with pytest.raises(TypeError):
        pass_at_k(10, 2.5, 1)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# fast_p and the geometric mean: properties
# ---------------------------------------------------------------------------------------


def correctness_rate(results: list[EvalResult]) -> float:
    return sum(r.correct for r in results) / len(results)


@given(result_lists, st.floats(0, 10), st.floats(0, 10), st.sampled_from([EAGER, COMPILE]))
def test_fast_p_is_non_increasing_in_p(results, p1, p2, baseline):
    low, high = sorted((p1, p2))
    assert fast_p(results, high, baseline) <= fast_p(results, low, baseline)


@given(result_lists, st.floats(0, 10), st.sampled_from([EAGER, COMPILE]))
def test_fast_p_is_at_most_the_correctness_rate(results, p, baseline):
    assert 0.0 <= fast_p(results, p, baseline) <= correctness_rate(results)


@given(st.lists(st.tuples(verdicts, speedup_values), min_size=1, max_size=40))
def test_fast_0_is_the_correctness_rate_when_every_correct_result_has_a_speedup(rows):
    results = [result(verdict, sample_id=str(i), eager=s) for i, (verdict, s) in enumerate(rows)]
    assert fast_p(results, 0.0) == correctness_rate(results)


@given(result_lists, st.sampled_from([EAGER, COMPILE]))
def test_geometric_mean_lies_between_min_and_max(results, baseline):
    measured = [r.speedups[baseline] for r in results if r.correct and baseline in r.speedups]
    mean = geometric_mean_speedup(results, baseline)
    if not measured:
        assert mean is None
    else:
        assert mean is not None
        assert min(measured) <= mean <= max(measured)


@given(speedup_values, st.integers(1, 20))
def test_geometric_mean_of_equal_speedups_is_that_speedup(speedup, count):
    results = [result(sample_id=str(i), eager=speedup) for i in range(count)]
    assert geometric_mean_speedup(results) == pytest.approx(speedup, rel=1e-12)


# ---------------------------------------------------------------------------------------
# fast_p and the geometric mean: examples and errors
# ---------------------------------------------------------------------------------------


def test_fast_p_counts_all_results_in_the_denominator():
    results = [
        result(Verdict.CORRECT, sample_id="0", eager=2.0),
        result(Verdict.CORRECT, sample_id="1", eager=0.5),
        result(Verdict.CORRECT, sample_id="2"),  # no speedup measured: never fast
        result(Verdict.INCORRECT, sample_id="3", eager=10.0),  # incorrect: never fast
    ]
    assert fast_p(results, 1.0) == 0.25
    assert fast_p(results, 0.0) == 0.5
    assert fast_p(results, 2.0) == 0.0  # strictly greater than p
    assert fast_p(results, 1.0, COMPILE) == 0.0


def test_fast_p_never_counts_cpu_timed_results():
    assert fast_p([cpu_result(), cpu_result(sample_id="1")], 0.0) == 0.0


def test_geometric_mean_known_value():
    results = [
        result(sample_id="0", eager=2.0),
        result(sample_id="1", eager=8.0),
        result(Verdict.INCORRECT, sample_id="2", eager=100.0),
    ]
    assert geometric_mean_speedup(results) == pytest.approx(4.0)
    assert geometric_mean_speedup(results, COMPILE) is None
    assert geometric_mean_speedup([]) is None


def test_fast_p_errors():
    with pytest.raises(ValueError, match="needs at least one"):
        fast_p([], 1.0)
    with pytest.raises(ValueError, match="must be a number >= 0, got -1"):
        fast_p([result(eager=2.0)], -1)
    with pytest.raises(ValueError, match="got nan"):
        fast_p([result(eager=2.0)], float("nan"))
    with pytest.raises(ValueError, match="baseline must be a non-empty name"):
        fast_p([result(eager=2.0)], 1.0, "")


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_invalid_speedups_are_reported_with_their_result(bad):
    results = [result(problem="conv", sample_id="3", eager=bad)]
    with pytest.raises(ValueError, match="problem 'conv' sample '3'.*must be finite and positive"):
        geometric_mean_speedup(results)
    with pytest.raises(ValueError, match="problem 'conv' sample '3'"):
        fast_p(results, 1.0)


# ---------------------------------------------------------------------------------------
# Summaries
# ---------------------------------------------------------------------------------------


def test_summary_of_gpu_results():
    results = [
        result(Verdict.CORRECT, problem="a", sample_id="0", eager=2.0, compile=0.5),
        result(Verdict.INCORRECT, problem="a", sample_id="1"),
        result(Verdict.CORRECT, problem="b", sample_id="0", eager=0.5, compile=0.25),
        result(Verdict.TIMEOUT, problem="b", sample_id="1"),
    ]
    summary = summarize(results, ks=(1, 2, 5))
    assert summary.total == 4
    assert summary.problems == 2
    assert summary.min_samples == 2
    assert summary.correct == 2
    assert summary.pass_rate == 0.5
    assert summary.verdicts[Verdict.CORRECT.value] == 2
    assert summary.verdicts[Verdict.INCORRECT.value] == 1
    assert summary.verdicts[Verdict.TIMEOUT.value] == 1
    assert summary.verdicts[Verdict.COMPILE_ERROR.value] == 0
    assert set(summary.verdicts) == {v.value for v in Verdict}
    assert summary.pass_at_k == (PassAtK(1, 0.5), PassAtK(2, 1.0), PassAtK(5, None))
    assert summary.fast_1_eager == 0.25
    assert summary.fast_1_compile == 0.0  # measured, and nothing was faster: 0, not None
    assert summary.speedup_eager == pytest.approx(1.0)
    assert summary.speedup_compile == pytest.approx(math.sqrt(0.5 * 0.25))
    assert summary.cpu_timed == 0
    a, b = summary.per_problem
    assert (a.problem, a.samples, a.correct, a.pass_rate) == ("a", 2, 1, 0.5)
    assert a.pass_at_k == (PassAtK(1, 0.5), PassAtK(2, 1.0))  # k=5 > 2 samples: left out
    assert (a.best_speedup_eager, a.best_speedup_compile) == (2.0, 0.5)
    assert b.best_speedup_eager == 0.5


def test_summary_groups_by_problem_in_name_order():
    results = [result(problem=name, sample_id=str(i)) for i, name in enumerate(["z", "a", "z", "m"])]
    summary = summarize(results, ks=(1,))
    assert [p.problem for p in summary.per_problem] == ["a", "m", "z"]
    assert [p.samples for p in summary.per_problem] == [1, 1, 2]
    assert summary.min_samples == 1


def test_summary_of_cpu_results_says_not_measured():
    results = [cpu_result(problem="a"), cpu_result(Verdict.INCORRECT, problem="b")]
    summary = summarize(results)
    assert summary.fast_1_eager is None
    assert summary.fast_1_compile is None
    assert summary.speedup_eager is None
    assert summary.speedup_compile is None
    assert summary.cpu_timed == 2
    assert summary.pass_rate == 0.5
    assert summary.pass_at_k == (PassAtK(1, 0.5), PassAtK(5, None), PassAtK(10, None))
    text = format_summary(summary)
    assert "fast_1 vs eager: not measured; vs compile: not measured" in text
    assert "2 results timed on the CPU" in text
    assert "pass@5 not reported (the smallest problem has 1 samples, fewer than 5)" in text


def test_summary_of_no_results():
    summary = summarize([])
    assert (summary.total, summary.problems, summary.min_samples, summary.correct) == (0, 0, 0, 0)
    assert summary.pass_rate is None
    assert all(entry.value is None for entry in summary.pass_at_k)
    assert summary.fast_1_eager is None and summary.speedup_eager is None
    assert summary.per_problem == ()
    assert format_summary(summary) == "no results"


def test_summary_merges_and_sorts_ks_and_rejects_bad_ones():
    summary = summarize([result()], ks=(1, 1, 3, 2))
    assert [e.k for e in summary.pass_at_k] == [1, 2, 3]
    with pytest.raises(ValueError, match="at least 1, got 0"):
        summarize([result()], ks=(0,))


def test_format_summary_lists_counts_and_figures():
    results = [result(problem="a", sample_id="0", eager=3.0), result(Verdict.COMPILE_ERROR, problem="a", sample_id="1")]
    text = format_summary(summarize(results, ks=(1,)))
    assert text.splitlines()[0] == "2 results on 1 problems: 1 correct (50.0%), 1 compile_error"
    assert "pass@1 0.500" in text
    assert "fast_1 vs eager: 0.500; vs compile: not measured" in text
    assert "vs eager: 3.000x" in text


@given(st.lists(eval_results(), max_size=30), st.lists(st.integers(1, 12), min_size=1, max_size=4))
def test_summary_round_trips_through_json_and_pickle(results, ks):
    summary = summarize(results, ks=ks)
    assert from_json_dict(Summary, json.loads(json.dumps(to_json_dict(summary)))) == summary
    assert loads(Summary, dumps(summary)) == summary
    assert pickle.loads(pickle.dumps(summary)) == summary


@given(st.lists(eval_results(), min_size=1, max_size=30), st.lists(st.integers(1, 12), min_size=1, max_size=4))
def test_summary_overall_pass_at_k_is_the_mean_of_the_problems(results, ks):
    summary = summarize(results, ks=ks)
    assert summary.total == len(results) == sum(p.samples for p in summary.per_problem)
    assert sum(summary.verdicts.values()) == summary.total
    for entry in summary.pass_at_k:
        if entry.k > summary.min_samples:
            assert entry.value is None
        else:
            per_problem = [next(e.value for e in p.pass_at_k if e.k == entry.k) for p in summary.per_problem]
            assert entry.value == pytest.approx(sum(per_problem) / len(per_problem))
            assert 0.0 <= entry.value <= 1.0
