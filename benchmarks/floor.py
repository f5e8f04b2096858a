"""The physical floor of an evaluation pass: the GPU time of the forward calls its
protocol must make, against the seconds each stage took.

A call's GPU time is measured by the pass itself: the reference's is its eager baseline's
median (the reference module is the eager baseline), the candidate's its own median. The
calls a stage must make, per candidate:

- ``reference``: the reference on every drawn input set (the correctness trials, the two
  timing sets, the two unseen sets on a GPU) and the size variation's call; once per
  problem (later candidates of it find the outputs kept);
- ``correctness``: the candidate on the trials' and the size variation's inputs;
- ``timing``: the candidate's timed calls (timed trials times calls per trial) and its
  calls on unseen inputs;
- ``baseline``: the eager baseline's timed calls; once per problem (kept for the others).

Everything else a stage does (process starts, compiles, recordings, warm-up and gap calls,
graph captures, drawing inputs, the reference recomputed for comparisons of outputs too
large to keep, comparing, waiting for the GPU) is above the floor: the ratio says how far
above. The pass's floor is the sum over its candidates, since a GPU at these sizes runs one
large call at a time: no pass on one GPU can take less, so ``60 * candidates / floor`` is
the most candidates per minute the protocol allows there. The size variation's call is
counted at the default sizes' time (its sizes are the problem's own, rebound).

Only candidates with a candidate time and an eager time are counted (correct ones on a
GPU); the others are reported as left out.
"""

from __future__ import annotations

from typing import Any

#: Stages with a GPU floor, in the order of the evaluation.
STAGES = ("reference", "correctness", "timing", "baseline")


def candidate_floor(result: dict[str, Any], trials: int, variation: bool, first_of_problem: bool) -> dict[str, float] | None:
    """Seconds of GPU work each stage of one candidate must do, or None when the result
    lacks the times it is made from (a candidate not timed, no eager baseline).

    :param result: a result of ``eval_throughput``'s summary (``eager_ms``, ``median_ms``,
        ``timed_calls``, ``unseen_ms``, ``unseen_calls``, ``eager_calls``).
    :param trials: correctness trials per candidate (``eval.trials``).
    :param variation: whether a size-variation trial runs (``eval.size_variation``; the
        problem may still have no size to vary, which makes this an over-count of one call).
    :param first_of_problem: the first candidate of its problem in the pass, which pays
        for the reference and the baseline.
    """
    eager_ms, median_ms = result.get("eager_ms"), result.get("median_ms")
    if not eager_ms or not median_ms or result.get("timed_calls") is None:
        return None
    unseen_ms = result.get("unseen_ms") or median_ms
    unseen_calls = result.get("unseen_calls") or 0
    extra = 1 if variation else 0
    return {
        "reference": (trials + 2 + (2 if unseen_calls else 0) + extra) * eager_ms / 1e3 if first_of_problem else 0.0,
        "correctness": (trials + extra) * median_ms / 1e3,
        "timing": (result["timed_calls"] * median_ms + unseen_calls * unseen_ms) / 1e3,
        "baseline": (result.get("eager_calls") or 0) * eager_ms / 1e3 if first_of_problem else 0.0,
    }


def pass_floor(results: list[dict[str, Any]], trials: int, variation: bool) -> dict[str, Any]:
    """Each stage's seconds (summed over the candidates counted) against its floor, and the
    pass's floor with the rate it allows."""
    measured = dict.fromkeys(STAGES, 0.0)
    floor = dict.fromkeys(STAGES, 0.0)
    seen: set[str] = set()
    counted = 0
    for result in results:
        problem = result["problem"]
        floors = candidate_floor(result, trials, variation, problem not in seen)
        if floors is None:
            continue
        seen.add(problem)
        counted += 1
        stages = result.get("stages_s", {})
        for stage in STAGES:
            floor[stage] += floors[stage]
            measured[stage] += stages.get(f"{stage}_s") or 0.0
    total = sum(floor.values())
    return {
        "counted": counted,
        "left_out": len(results) - counted,
        "stages": {stage: {"measured_s": round(measured[stage], 3), "floor_s": round(floor[stage], 3)} for stage in STAGES},
        "floor_s": round(total, 3),
        "most_per_minute": round(60 * counted / total, 1) if total > 0 else None,
    }


def floor_table(report: dict[str, Any], seconds: float) -> str:
    """``pass_floor``'s report as a Markdown table, with the pass's own seconds."""
    lines = [
        "| stage | seconds, summed over candidates | floor, s | above the floor |",
        "| --- | ---: | ---: | ---: |",
    ]
    for stage, row in report["stages"].items():
        ratio = f"{row['measured_s'] / row['floor_s']:.1f}x" if row["floor_s"] > 0 else "-"
        lines.append(f"| {stage} | {row['measured_s']:.1f} | {row['floor_s']:.1f} | {ratio} |")
    most = report["most_per_minute"]
    lines.append("")
    lines.append(
        f"The pass's GPU floor: {report['floor_s']:.1f} s for {report['counted']} candidates "
        f"({report['left_out']} left out: not timed), at most {most} candidates/min on one GPU; the pass took {seconds:.1f} s."
        if most is not None
        else f"No candidate had the times a floor is made from ({report['left_out']} left out)."
    )
    return "\n".join(lines)
