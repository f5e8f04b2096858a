"""Per-candidate overhead of persistent workers against a fresh worker process per candidate.

Evaluates the same honest example candidate N times with one worker: once with a
persistent worker (torch and the device start once), once with ``recycle_after=1`` (a
new worker process for every candidate). Also times a bare fresh process that imports
torch and initialises the device. Usage:

    python benchmarks/eval_overhead.py --device cuda --n 20 --out results/overhead.json
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import versions, write_json  # noqa: E402


def run(device: str, n: int, recycle_after: int) -> float:
    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate
    from kz_core.problems import load_problems

    repo = Path(__file__).resolve().parents[1]
    code = (repo / "examples" / "candidates" / "triton" / "1_vector_add.py").read_text()
    config = load_config(None, [f"eval.device={device}", "eval.workers=1", "eval.cache=false", "eval.timing=false", f"eval.recycle_after={recycle_after}"]).eval
    candidates = [Candidate("1_vector_add", "triton", code + f"\n# {i}\n", str(i)) for i in range(n)]
    with Evaluator(load_problems("examples").problems, config) as evaluator:
        evaluator.warm_up()
        evaluator.evaluate(candidates[:1])  # compile caches, reference
        started = time.perf_counter()
        results = evaluator.evaluate(candidates[1:])
        elapsed = time.perf_counter() - started
    assert all(r.correct for r in results), [r.message for r in results if not r.correct]
    return elapsed / (n - 1)


def fresh_process(device: str, repeats: int = 3) -> float:
    code = "import torch\n" + ("torch.zeros(1, device='cuda'); torch.cuda.synchronize()\n" if device.startswith("cuda") else "torch.zeros(1)\n")
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    persistent = run(args.device, args.n, recycle_after=0)
    fresh = run(args.device, max(6, args.n // 3), recycle_after=1)
    write_json(
        args.out,
        {
            "benchmark": "eval_overhead",
            "device": args.device,
            "versions": versions(),
            "seconds_per_candidate_persistent_worker": round(persistent, 3),
            "seconds_per_candidate_fresh_worker": round(fresh, 3),
            "seconds_fresh_process_import_torch_and_device": round(fresh_process(args.device), 3),
            "saved_per_candidate_s": round(fresh - persistent, 3),
        },
    )


if __name__ == "__main__":
    main()
