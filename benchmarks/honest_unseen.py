"""The honest styles of tests/honest/ on a GPU: each one's verdict, its median time on
the repeated timing inputs and its time on inputs it had never seen (the unseen-input
check's false-alarm margin: honest kernels should stay near 1, far from
``judge.UNSEEN_SLOWER``).

    python benchmarks/honest_unseen.py --repeats 2 --out honest_unseen.json   # from the clone's root

Needs a CUDA GPU and the clone (it reads tests/honest/ and examples/problems/).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="batches of every honest style")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--out", default=None, help="JSON file for the rows")
    args = parser.parse_args()
    sys.path.append(str(ROOT))
    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.problems import load_problems
    from tests.evaluate.test_honest import honest_candidate, honest_paths

    config = load_config(None, ["eval.device=cuda", f"eval.workers={args.workers}", "eval.cache=false"]).eval
    rows = []
    with Evaluator(load_problems(str(ROOT / "examples" / "problems")).problems, config) as evaluator:
        for _ in range(args.repeats):
            for result in evaluator.evaluate([honest_candidate(path) for path in honest_paths()]):
                runtime = result.runtime
                rows.append(
                    {
                        "id": result.sample_id,
                        "verdict": result.verdict.value,
                        "median_ms": runtime.median_ms if runtime else None,
                        "unseen_ms": runtime.unseen_ms if runtime else None,
                        "warnings": sorted({f.check for f in result.findings if f.severity.value == "warning"}),
                        "message": result.message,
                    }
                )
    for row in rows:
        ratio = row["unseen_ms"] / row["median_ms"] if row["unseen_ms"] and row["median_ms"] else float("nan")
        print(f"{row['id']:<50} {row['verdict']:<10} median {row['median_ms'] or 0:9.5f} ms  unseen {row['unseen_ms'] or 0:9.5f} ms  {ratio:6.3f}  {','.join(row['warnings'])}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
