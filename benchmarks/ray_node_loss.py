"""What losing a Ray node costs (issue 19): the same candidate set on a local Ray cluster of
evaluator nodes, whole and with one node removed after the first result.

A head node with nothing to run and ``--nodes`` worker nodes, one evaluator actor each
(``eval.engine=ray``), are started here with ``ray.cluster_utils``. Three passes over the
problems, each with candidate sources of its own (nothing is reused from an earlier pass):
``cold`` (references and baselines computed), ``warm`` (the cluster whole) and ``lost``
(the last node removed when the first result comes back: its candidates in flight are
evaluated again on another node). Usage:

    python benchmarks/ray_node_loss.py --problems .kb/problems.jsonl --level 1 --ids 1-18 --device cuda --workers 4
    python benchmarks/ray_node_loss.py --problems examples --level 0 --device cpu --workers 1

On a machine with one GPU every node claims that GPU (``num_gpus=1`` each), so the actors
share it, each with its own memory budget: choose problems below ``eval.large_problem_mb``
(the matmuls of level 1, 1-18) or one node's worth of workers.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import kernelbench_problems, versions, wrapping_candidate, write_json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", required=True)
    parser.add_argument("--level", type=int, default=1, help="0: every problem of --problems")
    parser.add_argument("--ids", default="", help="only these problem ids, numbers and ranges (e.g. 1-18)")
    parser.add_argument("--limit", type=int, default=0, help="first N problems only")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4, help="candidate workers per node's evaluator")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (repeatable)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.nodes < 2:
        parser.error("--nodes must be at least 2 (one is removed)")

    import ray
    from loguru import logger
    from ray import cluster_utils

    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate

    problems = kernelbench_problems(args.problems, args.level, args.ids)
    if args.limit:
        problems = problems[: args.limit]
    if not problems:
        parser.error(f"no problems selected from {args.problems}")
    on_gpu = args.device != "cpu"
    config = load_config(
        None,
        [f"eval.device={args.device}", f"eval.workers={args.workers}", "eval.engine=ray", "eval.guards=warn", "eval.baselines=[eager]", "eval.time_budget_ms=300", *args.set],
    ).eval

    lost_lanes: list[str] = []
    sink = logger.add(lambda message: lost_lanes.append(str(message)), level="WARNING", filter=lambda record: "was lost" in record["message"])
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0, "include_dashboard": False, "object_store_memory": 200 << 20})
    node_args = {"num_gpus": 1, "num_cpus": 4} if on_gpu else {"num_cpus": 1}
    nodes = [cluster.add_node(object_store_memory=200 << 20, **node_args) for _ in range(args.nodes)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    passes: list[dict] = []
    try:
        with Evaluator(problems, config) as evaluator:
            print(f"{len(evaluator.lanes)} evaluator actors: {', '.join(lane.device for lane in evaluator.lanes)}", flush=True)
            for name in ("cold", "warm", "lost"):
                candidates = [Candidate(p.name, "triton", wrapping_candidate(p.code) + f"\n# pass {name}\n", f"{name}-0") for p in problems]
                before = len(lost_lanes)
                removed: list[float] = []
                started = time.perf_counter()

                def progress(result, name=name, started=started, removed=removed) -> None:
                    if name == "lost" and not removed:
                        removed.append(time.perf_counter() - started)
                        cluster.remove_node(nodes[-1])
                        print(f"  node removed after {removed[0]:.1f} s", flush=True)

                results = evaluator.evaluate(candidates, progress=progress)
                elapsed = time.perf_counter() - started
                entry = {
                    "pass": name,
                    "candidates": len(results),
                    "seconds": round(elapsed, 1),
                    "candidates_per_minute": round(60 * len(results) / elapsed, 1),
                    "verdicts": dict(collections.Counter(r.verdict.value for r in results)),
                    "evaluated_again_elsewhere": len(lost_lanes) - before,
                    "node_removed_after_s": round(removed[0], 1) if removed else None,
                    "lanes_alive": sum(1 for lane in evaluator.lanes if not lane.lost),
                }
                passes.append(entry)
                print(entry, flush=True)
    finally:
        logger.remove(sink)
        ray.shutdown()
        cluster.shutdown()
    print(f"{'pass':<6} {'candidates':>10} {'seconds':>8} {'per min':>8} {'again':>6}  verdicts")
    for entry in passes:
        print(f"{entry['pass']:<6} {entry['candidates']:>10} {entry['seconds']:>8} {entry['candidates_per_minute']:>8} {entry['evaluated_again_elsewhere']:>6}  {entry['verdicts']}")
    write_json(args.out, {"benchmark": "ray_node_loss", "nodes": args.nodes, "workers": args.workers, "device": args.device, "overrides": args.set, "versions": versions(), "passes": passes})
    if any(entry["verdicts"].get("correct", 0) != entry["candidates"] for entry in passes):
        sys.exit(1)  # a verdict other than correct: the benchmark's candidates are all honest


if __name__ == "__main__":
    main()
