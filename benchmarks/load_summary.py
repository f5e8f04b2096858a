"""What bounded a GPU run: the GPU's and the host's load, sampled once a second beside it.

Reads the output of ``nvidia-smi dmon -s um -d 1 -o T`` (SM and memory-controller
utilisation, memory used) and of ``vmstat -n 1`` (the host's cores: user, system, idle,
processes waiting for a core), both started by ``benchmarks/gpu_session.sh throughput``,
and prints the mean and the quartiles of each column over the samples. Usage:

    python benchmarks/load_summary.py dmon.txt vmstat.txt
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path


def read_table(path: Path, first_column: str) -> dict[str, list[float]]:
    """The columns of a whitespace table whose header line's first word (``#`` stripped)
    is ``first_column``; other lines that are not rows of it, and cells that are not
    numbers, are left out."""
    columns: list[str] = []
    values: dict[str, list[float]] = {}
    for line in path.read_text(errors="replace").splitlines():
        words = line.lstrip("#").split()
        if not words:
            continue
        if words[0] == first_column:
            columns = words
            continue
        if line.startswith("#") or len(words) != len(columns):
            continue
        for name, word in zip(columns, words):
            try:
                values.setdefault(name, []).append(float(word))
            except ValueError:
                pass
    return values


def describe(name: str, samples: list[float]) -> str:
    if len(samples) < 2:
        return f"{name:>8}: {len(samples)} sample(s)"
    q1, q2, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return f"{name:>8}: mean {statistics.fmean(samples):8.1f}   quartiles {q1:8.1f} {q2:8.1f} {q3:8.1f}   max {max(samples):8.1f}   ({len(samples)} samples)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dmon", type=Path)
    parser.add_argument("vmstat", type=Path)
    args = parser.parse_args()
    if args.dmon.exists():
        gpu = read_table(args.dmon, "Time")
        print("GPU (nvidia-smi dmon: sm and mem are % of the interval busy; fb is MB used)")
        for name in ("sm", "mem", "fb"):
            if name in gpu:
                print(describe(name, gpu[name]))
    if args.vmstat.exists():
        host = read_table(args.vmstat, "r")
        print("host (vmstat: r = processes running or waiting for a core; us/sy/id = % of all cores)")
        for name in ("r", "us", "sy", "id"):
            if name in host:
                print(describe(name, host[name]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
