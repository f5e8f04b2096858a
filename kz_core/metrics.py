"""Evaluation metrics over :class:`~kz_core.model.EvalResult`: pass@k, fast_p, speedups.

What ``kz eval`` and ``kz generate`` report, and what training logs:

- :func:`pass_at_k`: the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language
  Models Trained on Code"), the chance that at least one of ``k`` samples drawn without
  replacement from ``n`` (of which ``c`` are correct) is correct.
- :func:`fast_p`: KernelBench's fast_p, the fraction of *all* results that are correct and
  faster than a baseline by more than a factor ``p``.
- :func:`geometric_mean_speedup`: the geometric mean of the speedups of correct results.
- :func:`summarize`: all of the above per problem and overall, as a frozen, JSON-friendly
  :class:`Summary` (``kz eval --json`` prints it through ``kz_core.serialization``), and
  :func:`format_summary` for people.

A speedup is only ever read from ``EvalResult.speedups``: timings with clock ``"cpu"`` carry
none, so a CPU run reports fast_p and speedups as "not measured" (``None``), never as 0.

This module computes numbers from results and nothing else: no I/O, no printing, no torch,
no timing of its own, and it never changes a result or its verdict.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable, Sequence

import attrs

from kz_core.model import EvalResult, Verdict

#: The baseline name for PyTorch eager execution of the reference ``Model``.
EAGER = "eager"
#: The baseline name for ``torch.compile`` of the reference ``Model``.
COMPILE = "compile"
#: The ``k`` values :func:`summarize` reports by default (those of Chen et al. 2021).
DEFAULT_KS: tuple[int, ...] = (1, 5, 10)


# ---------------------------------------------------------------------------------------
# pass@k
# ---------------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` samples of which ``c`` are correct.

    ``1 - C(n - c, k) / C(n, k)``, computed without large binomials as
    ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)`` (Chen et al. 2021, figure 3). When fewer
    than ``k`` samples are incorrect every draw of ``k`` holds a correct one, and the
    result is exactly 1.0.

    :param n: number of samples drawn for the problem (>= 1).
    :param c: how many of them are correct (0 <= c <= n).
    :param k: the budget of attempts (1 <= k <= n).
    :returns: a probability in [0, 1].
    :raises TypeError: if an argument is not an integer.
    :raises ValueError: if the arguments are out of range, with the reason.
    """
    n, c, k = operator.index(n), operator.index(c), operator.index(k)
    if n < 0 or c < 0:
        raise ValueError(f"pass_at_k: n (samples) and c (correct samples) must be non-negative, got n={n}, c={c}")
    if k < 1:
        raise ValueError(f"pass_at_k: k must be at least 1, got k={k}")
    if c > n:
        raise ValueError(f"pass_at_k: c (correct samples) cannot exceed n (samples), got c={c} > n={n}")
    if k > n:
        raise ValueError(
            f"pass_at_k: k cannot exceed n (samples), got k={k} > n={n}; pass@{k} needs at least {k} samples"
        )
    if n - c < k:
        return 1.0
    # Multiply from i = n downwards so that the product for c + 1 is the product for c
    # times one more factor in [0, 1): the estimate is then exactly monotone in c even in
    # floating point, not only up to rounding.
    probability_all_wrong = 1.0
    for i in range(n, n - c, -1):
        probability_all_wrong *= 1.0 - k / i
    return 1.0 - probability_all_wrong


# ---------------------------------------------------------------------------------------
# Speedups
# ---------------------------------------------------------------------------------------


def _measured_speedup(result: EvalResult, baseline: str) -> float | None:
    """``result``'s speedup against ``baseline``, or None when none was measured.

    :raises ValueError: if the recorded speedup is not a finite positive number, which
        only a broken evaluator writes.
    """
    speedup = result.speedups.get(baseline)
    if speedup is None:
        return None
    if not (math.isfinite(speedup) and speedup > 0):
        raise ValueError(
            f"speedup against {baseline!r} of problem {result.problem!r} sample {result.sample_id!r} "
            f"is {speedup!r}; a speedup is a ratio of two positive medians and must be finite and positive"
        )
    return float(speedup)


def _check_baseline(baseline: str) -> None:
    if not isinstance(baseline, str) or not baseline:
        raise ValueError(f"baseline must be a non-empty name such as {EAGER!r} or {COMPILE!r}, got {baseline!r}")


def fast_p(results: Iterable[EvalResult], p: float, baseline: str = EAGER) -> float:
    """KernelBench's fast_p: the fraction of results that are correct and more than ``p``x faster.

    The denominator is the number of results, correct or not. A result counts when it is
    correct and ``speedups[baseline] > p``; a result without a speedup against
    ``baseline`` (CPU timings never have one) never counts. ``fast_p(results, 0)`` is the
    correctness rate when every correct result has a speedup.

    :param results: the results to score (at least one).
    :param p: the speedup threshold, >= 0 (1.0: faster than the baseline at all).
    :param baseline: the key of ``EvalResult.speedups`` to compare against.
    :returns: a fraction in [0, 1].
    :raises ValueError: for no results, a negative or NaN ``p``, an empty baseline name, or
        a correct result whose speedup is not finite and positive.
    """
    _check_baseline(baseline)
    if not (isinstance(p, numbers.Real) and p >= 0):
        raise ValueError(f"fast_p: p is a speedup threshold and must be a number >= 0, got {p!r}")
    results = list(results)
    if not results:
        raise ValueError("fast_p: no results; fast_p is a fraction of the results and needs at least one")
    fast = 0
    for result in results:
        if not result.correct:
            continue
        speedup = _measured_speedup(result, baseline)
        if speedup is not None and speedup > p:
            fast += 1
    return fast / len(results)


def geometric_mean_speedup(results: Iterable[EvalResult], baseline: str = EAGER) -> float | None:
    """The geometric mean of ``speedups[baseline]`` over the correct results that have one.

    :param results: the results to average over; incorrect ones and those without a
        speedup against ``baseline`` are left out.
    :param baseline: the key of ``EvalResult.speedups`` to average.
    :returns: the geometric mean, or None when no correct result has such a speedup.
    :raises ValueError: for an empty baseline name or a speedup that is not finite and
        positive.
    """
    _check_baseline(baseline)
    speedups = [
        speedup
        for result in results
        if result.correct and (speedup := _measured_speedup(result, baseline)) is not None
    ]
    if not speedups:
        return None
    mean = math.exp(math.fsum(math.log(s) for s in speedups) / len(speedups))
    # exp(mean(log)) can land an ulp outside [min, max] (e.g. for equal speedups); the
    # geometric mean cannot, so clamp to keep the documented bound exact.
    return min(max(mean, min(speedups)), max(speedups))


# ---------------------------------------------------------------------------------------
# Summaries
# ---------------------------------------------------------------------------------------


@attrs.frozen
class PassAtK:
    """pass@k for one ``k``.

    :ivar k: the budget of attempts.
    :ivar value: the estimate in [0, 1]; None when it cannot be computed (overall: some
        problem has fewer than ``k`` samples, or there are no problems).
    """

    k: int
    value: float | None


@attrs.frozen
class ProblemSummary:
    """The results of one problem (all its samples).

    :ivar problem: the problem's name (``EvalResult.problem``).
    :ivar samples: how many results it has.
    :ivar correct: how many of those are correct.
    :ivar pass_rate: ``correct / samples``.
    :ivar pass_at_k: pass@k for each requested ``k`` with ``k <= samples``, ascending.
    :ivar best_speedup_eager: the best speedup against eager of a correct sample; None
        when none was measured.
    :ivar best_speedup_compile: the same against ``torch.compile``.
    """

    problem: str
    samples: int
    correct: int
    pass_rate: float
    pass_at_k: tuple[PassAtK, ...] = ()
    best_speedup_eager: float | None = None
    best_speedup_compile: float | None = None


@attrs.frozen
class Summary:
    """Everything ``kz eval`` and ``kz generate`` report about a set of results.

    Fractions are in [0, 1]. A speed figure is None, "not measured", when no result has a
    speedup against that baseline (every CPU run), never 0.

    :ivar total: number of results.
    :ivar problems: number of distinct problems.
    :ivar min_samples: the fewest samples any problem has (0 without results); pass@k
        overall is reported for ``k <= min_samples`` only.
    :ivar verdicts: count of results per verdict, keyed by ``Verdict`` value, every verdict
        present (zeros included).
    :ivar correct: number of correct results.
    :ivar pass_rate: ``correct / total``; None without results.
    :ivar pass_at_k: for each requested ``k`` ascending, the mean over problems of their
        pass@k; its value is None when some problem has fewer than ``k`` samples.
    :ivar fast_1_eager: fast_1 against eager (fraction of all results that are correct and
        faster than eager); None when no result has a speedup against eager.
    :ivar fast_1_compile: fast_1 against ``torch.compile``; None when none was measured.
    :ivar speedup_eager: geometric-mean speedup of correct results against eager; None when
        no correct result has one.
    :ivar speedup_compile: the same against ``torch.compile``.
    :ivar cpu_timed: number of results timed with clock ``"cpu"`` (candidate or baseline),
        which carry no speedups.
    :ivar per_problem: one entry per problem, sorted by name.
    """

    total: int
    problems: int
    min_samples: int
    verdicts: dict[str, int]
    correct: int
    pass_rate: float | None
    pass_at_k: tuple[PassAtK, ...]
    fast_1_eager: float | None
    fast_1_compile: float | None
    speedup_eager: float | None
    speedup_compile: float | None
    cpu_timed: int
    per_problem: tuple[ProblemSummary, ...]


def _best_speedup(results: Sequence[EvalResult], baseline: str) -> float | None:
    speedups = [s for r in results if r.correct and (s := _measured_speedup(r, baseline)) is not None]
    return max(speedups) if speedups else None


def _fast_1_if_measured(results: Sequence[EvalResult], baseline: str) -> float | None:
    if not any(_measured_speedup(r, baseline) is not None for r in results):
        return None
    return fast_p(results, 1.0, baseline)


def _is_cpu_timed(result: EvalResult) -> bool:
    timings = ([result.runtime] if result.runtime is not None else []) + list(result.baselines.values())
    return any(t.clock == "cpu" for t in timings)


def _normalise_ks(ks: Iterable[int]) -> tuple[int, ...]:
    normalised = set()
    for k in ks:
        k = operator.index(k)
        if k < 1:
            raise ValueError(f"summarize: every k of pass@k must be at least 1, got {k}")
        normalised.add(k)
    return tuple(sorted(normalised))


def summarize(results: Iterable[EvalResult], ks: Iterable[int] = DEFAULT_KS) -> Summary:
    """Summarise results per problem (grouped by ``EvalResult.problem``) and overall.

    :param results: results of any number of problems and samples, in any order.
    :param ks: the ``k`` values of pass@k to report (each >= 1; duplicates are merged).
    :returns: a :class:`Summary`; it round-trips through
        ``kz_core.serialization.to_json_dict`` / ``from_json_dict``.
    :raises ValueError: for a ``k`` below 1 or a speedup that is not finite and positive.
    """
    results = list(results)
    ks = _normalise_ks(ks)

    by_problem: dict[str, list[EvalResult]] = {}
    for result in results:
        by_problem.setdefault(result.problem, []).append(result)

    per_problem = []
    for name in sorted(by_problem):
        samples = by_problem[name]
        n = len(samples)
        c = sum(r.correct for r in samples)
        per_problem.append(
            ProblemSummary(
                problem=name,
                samples=n,
                correct=c,
                pass_rate=c / n,
                pass_at_k=tuple(PassAtK(k, pass_at_k(n, c, k)) for k in ks if k <= n),
                best_speedup_eager=_best_speedup(samples, EAGER),
                best_speedup_compile=_best_speedup(samples, COMPILE),
            )
        )

    min_samples = min((p.samples for p in per_problem), default=0)
    overall_pass_at_k = []
    for k in ks:
        if per_problem and k <= min_samples:
            values = [next(e.value for e in p.pass_at_k if e.k == k) for p in per_problem]
            overall_pass_at_k.append(PassAtK(k, math.fsum(values) / len(values)))
        else:
            overall_pass_at_k.append(PassAtK(k, None))

    correct = sum(r.correct for r in results)
    verdicts = {v.value: 0 for v in Verdict}
    for result in results:
        verdicts[result.verdict.value] += 1

    return Summary(
        total=len(results),
        problems=len(per_problem),
        min_samples=min_samples,
        verdicts=verdicts,
        correct=correct,
        pass_rate=correct / len(results) if results else None,
        pass_at_k=tuple(overall_pass_at_k),
        fast_1_eager=_fast_1_if_measured(results, EAGER),
        fast_1_compile=_fast_1_if_measured(results, COMPILE),
        speedup_eager=geometric_mean_speedup(results, EAGER),
        speedup_compile=geometric_mean_speedup(results, COMPILE),
        cpu_timed=sum(_is_cpu_timed(r) for r in results),
        per_problem=tuple(per_problem),
    )


def format_summary(summary: Summary) -> str:
    """A few lines of plain text for people: counts, pass@k, fast_1 and speedups.

    Unmeasured figures read "not measured" and unreportable pass@k say why, so a CPU run
    is never mistaken for a slow one.
    """
    if summary.total == 0:
        return "no results"
    failures = ", ".join(
        f"{count} {verdict}"
        for verdict, count in summary.verdicts.items()
        if count and verdict != Verdict.CORRECT.value
    )
    lines = [
        f"{summary.total} results on {summary.problems} problems: {summary.correct} correct "
        f"({summary.correct / summary.total:.1%})" + (f", {failures}" if failures else "")
    ]
    pass_parts = []
    for entry in summary.pass_at_k:
        if entry.value is None:
            pass_parts.append(
                f"pass@{entry.k} not reported (the smallest problem has {summary.min_samples} samples, fewer than {entry.k})"
            )
        else:
            pass_parts.append(f"pass@{entry.k} {entry.value:.3f}")
    if pass_parts:
        lines.append("; ".join(pass_parts))

    def speed(value: float | None, unit: str) -> str:
        return "not measured" if value is None else f"{value:.3f}{unit}"

    lines.append(f"fast_1 vs eager: {speed(summary.fast_1_eager, '')}; vs compile: {speed(summary.fast_1_compile, '')}")
    lines.append(
        f"geometric-mean speedup of correct results vs eager: {speed(summary.speedup_eager, 'x')}; "
        f"vs compile: {speed(summary.speedup_compile, 'x')}"
    )
    if summary.cpu_timed:
        lines.append(f"{summary.cpu_timed} results timed on the CPU: CPU timings are never turned into speedups")
    return "\n".join(lines)
