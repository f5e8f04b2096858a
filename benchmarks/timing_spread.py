"""Spread of repeated timings of one kernel: IQR / median per run, and across runs.

Evaluates the same candidate R times (journal off) and reports each run's median and
interquartile range and the spread of the medians, for each timing method asked for
(``eval.timing_method``: graph, events). Goal: IQR under 1% of the median. Usage:

    python benchmarks/timing_spread.py --device cuda --repeats 6 --methods graph,events --problems problems.jsonl
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import kernelbench_problems, versions, write_json  # noqa: E402


def spread(problem, code: str, device: str, repeats: int, method: str, overrides: list[str]) -> dict:
    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate

    config = load_config(None, [f"eval.device={device}", "eval.workers=1", "eval.cache=false", "eval.baselines=[eager]", f"eval.timing_method={method}", *overrides]).eval
    with Evaluator([problem], config) as evaluator:
        results = evaluator.evaluate([Candidate(problem.name, "triton", code + f"\n# {i}\n", str(i)) for i in range(repeats)])
    runs = []
    for result in results:
        assert result.correct and result.runtime is not None, result.message
        runtime = result.runtime
        runs.append(
            {
                "median_ms": runtime.median_ms,
                "iqr_ms": runtime.iqr_ms,
                "trials": runtime.trials,
                "relative_iqr": runtime.iqr_ms / runtime.median_ms,
                "clock": runtime.clock,
                "calls_per_trial": runtime.calls_per_trial,
                "note": runtime.note,
            }
        )
    medians = [r["median_ms"] for r in runs]
    eager = results[0].baselines.get("eager")
    return {
        "problem": problem.name,
        "method": method,
        "overrides": overrides,
        "runs": runs,
        "median_of_medians_ms": statistics.median(medians),
        "relative_spread_of_medians": (max(medians) - min(medians)) / statistics.median(medians),
        "max_relative_iqr": max(r["relative_iqr"] for r in runs),
        "eager_median_ms": eager.median_ms if eager else None,
        "eager_relative_iqr": eager.iqr_ms / eager.median_ms if eager and eager.median_ms else None,
        "eager_clock": eager.clock if eager else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--methods", default="graph", help="comma-separated eval.timing_method values to compare")
    parser.add_argument("--problems", default=None, help="KernelBench problems.jsonl for the large matmul (level 1, problem 1)")
    parser.add_argument("--out", default=None)
    parser.add_argument("overrides", nargs="*", help="eval config overrides, e.g. eval.timing_idle_ratio=1")
    args = parser.parse_args()
    from kz_core.problems import load_problems

    repo = Path(__file__).resolve().parents[1]
    examples = {p.name: p for p in load_problems("examples").problems}
    matmul = (repo / "examples" / "candidates" / "triton" / "5_matmul.py").read_text()
    softmax = (repo / "examples" / "candidates" / "triton" / "3_row_softmax.py").read_text()
    cases = []
    for method in args.methods.split(","):
        cases.append(spread(examples["3_row_softmax"], softmax, args.device, args.repeats, method, args.overrides))
        if args.problems:
            square = kernelbench_problems(args.problems, 1)[0]  # 1_Square_matrix_multiplication_, N = 4096
            cases.append(spread(square, matmul, args.device, args.repeats, method, args.overrides))
    write_json(args.out, {"benchmark": "timing_spread", "versions": versions(), "cases": cases})


if __name__ == "__main__":
    main()
