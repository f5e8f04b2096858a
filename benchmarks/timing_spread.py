"""Spread of repeated timings of one kernel: IQR / median per run, and across runs.

Evaluates the same candidate R times (journal off) and reports each run's median and
interquartile range and the spread of the medians. Goal: IQR under 1% of the median.
Usage:

    python benchmarks/timing_spread.py --device cuda --repeats 8 --problems problems.jsonl
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import kernelbench_problems, versions, write_json  # noqa: E402


def spread(problem, code: str, device: str, repeats: int) -> dict:
    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate

    config = load_config(None, [f"eval.device={device}", "eval.workers=1", "eval.cache=false", "eval.baselines=[eager]"]).eval
    with Evaluator([problem], config) as evaluator:
        results = evaluator.evaluate([Candidate(problem.name, "triton", code + f"\n# {i}\n", str(i)) for i in range(repeats)])
    runs = []
    for result in results:
        assert result.correct and result.runtime is not None, result.message
        runs.append({"median_ms": result.runtime.median_ms, "iqr_ms": result.runtime.iqr_ms, "trials": result.runtime.trials, "relative_iqr": result.runtime.iqr_ms / result.runtime.median_ms})
    medians = [r["median_ms"] for r in runs]
    return {
        "problem": problem.name,
        "runs": runs,
        "median_of_medians_ms": statistics.median(medians),
        "relative_spread_of_medians": (max(medians) - min(medians)) / statistics.median(medians),
        "max_relative_iqr": max(r["relative_iqr"] for r in runs),
        "eager_median_ms": results[0].baselines["eager"].median_ms if "eager" in results[0].baselines else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--problems", default=None, help="KernelBench problems.jsonl for the large matmul (level 1, problem 1)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from kz_core.problems import load_problems

    repo = Path(__file__).resolve().parents[1]
    examples = {p.name: p for p in load_problems("examples").problems}
    matmul = (repo / "examples" / "candidates" / "triton" / "5_matmul.py").read_text()
    softmax = (repo / "examples" / "candidates" / "triton" / "3_row_softmax.py").read_text()
    cases = [spread(examples["3_row_softmax"], softmax, args.device, args.repeats)]
    if args.problems:
        square = kernelbench_problems(args.problems, 1)[0]  # 1_Square_matrix_multiplication_, N = 4096
        cases.append(spread(square, matmul, args.device, args.repeats))
    write_json(args.out, {"benchmark": "timing_spread", "versions": versions(), "cases": cases})


if __name__ == "__main__":
    main()
