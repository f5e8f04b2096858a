"""The cost of one sandboxed worker: forked by the zygote, placed (namespaces, Landlock,
seccomp, a cgroup of its own, memory file systems), asked for its identity, shut down and
its group and scratch folder removed, with each isolation mechanism named by ``--off``
turned off in turn (``none``: everything the machine gives). Rounds alternate so that a
busy machine weighs on every variant alike. Usage:

    python benchmarks/worker_start.py --device cpu --n 20 --off none cgroups
    python benchmarks/worker_start.py --device cuda --n 20 --off none cgroups --out results/worker_start.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import versions, write_json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--n", type=int, default=20, help="workers per variant and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--role", default="candidate", choices=["candidate", "reference", "executor"])
    parser.add_argument("--off", nargs="+", default=["none", "cgroups"], help="mechanisms to turn off, one variant each (comma-joined for several); none: all on")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.device == "cuda":
        args.device = "cuda:0"  # a worker is bound to one device

    from kz_core.evaluate.sandbox import SandboxSettings, WorkerProcess, start_zygote

    root = Path(tempfile.mkdtemp(prefix="kz-worker-start-"))
    times: dict[str, list[float]] = {variant: [] for variant in args.off}
    summaries: dict[str, str] = {}
    for round_index in range(args.rounds):
        for variant in args.off:
            off = [] if variant == "none" else variant.split(",")
            settings = SandboxSettings(scratch_root=root / f"{variant}-{round_index}", group_memory_bytes=8 << 30)
            zygote = start_zygote(args.device, settings, off)
            summaries[variant] = zygote.support.summary()
            try:
                WorkerProcess(args.device, args.role, settings, zygote=zygote).shutdown()  # first fork: pages warm
                for _ in range(args.n):
                    started = time.perf_counter()
                    WorkerProcess(args.device, args.role, settings, zygote=zygote).shutdown()
                    times[variant].append(time.perf_counter() - started)
            finally:
                zygote.close()
    rows = {
        variant: {
            "isolation": summaries[variant],
            "workers": len(values),
            "median_ms": round(statistics.median(values) * 1000, 1),
            "min_ms": round(min(values) * 1000, 1),
            "p90_ms": round(sorted(values)[int(0.9 * (len(values) - 1))] * 1000, 1),
        }
        for variant, values in times.items()
    }
    write_json(args.out, {"benchmark": "worker_start", "device": args.device, "role": args.role, "versions": versions(), "variants": rows})


if __name__ == "__main__":
    main()
