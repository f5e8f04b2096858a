"""What a fresh worker process pays the first time it does something on a GPU, and what
poisoning the allocator's free memory costs before a trial, measured each in processes
of their own (kz starts one reference worker per problem and one candidate worker and
one executor per candidate, so first uses are paid in every one of them).

    python benchmarks/first_use_costs.py [--repeat 3] [--cached-gb 8]

Prints one line per measurement: milliseconds, median over --repeat fresh processes:
- ``context``: the CUDA context (``torch.empty(1, device="cuda")``);
- ``checks warm-up``: the checks' Triton kernels (kz_core/evaluate/device_checks.py) loaded,
  from a cache a process before this one filled;
- ``first fingerprint``: the first fingerprint of a 64 MiB input, without that warm-up;
- ``cublas first`` / ``cudnn first``: a first 64 x 64 matmul, a first small conv2d;
- ``conv first`` / ``conv second``: a KernelBench-sized conv2d called once and again, in a
  process whose cuDNN is not yet initialised, and (``... warmed``) in one where a small
  conv2d ran first;
- ``poison empty`` / ``poison in place``: ``poison_free_memory`` of the version that gave
  the cache back first and of the one that fills the free blocks where they lie, with
  --cached-gb of freed blocks (of several sizes) in the allocator's cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PROBE = r"""
import json, sys, time
import torch
what = sys.argv[1]
cached_gb = float(sys.argv[2])
def ms(fn):
    torch.cuda.synchronize(); t = time.perf_counter(); fn(); torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3
out = {}
out["context"] = ms(lambda: torch.empty(1, device="cuda"))
if what == "checks":
    from kz_core.evaluate import device_checks
    out["checks warm-up"] = ms(lambda: device_checks.warm_up("cuda"))
elif what == "fingerprint":
    from kz_core.evaluate.execution import fingerprint
    x = torch.randn(1 << 24, device="cuda")
    out["first fingerprint"] = ms(lambda: fingerprint([x]))
    out["second fingerprint"] = ms(lambda: fingerprint([x]))
elif what == "libraries":
    a = torch.randn(64, 64, device="cuda")
    out["cublas first"] = ms(lambda: a @ a)
    x = torch.randn(1, 3, 16, 16, device="cuda"); w = torch.randn(8, 3, 3, 3, device="cuda")
    out["cudnn first"] = ms(lambda: torch.nn.functional.conv2d(x, w))
elif what in ("conv", "conv-warmed"):
    if what == "conv-warmed":
        x = torch.randn(1, 3, 16, 16, device="cuda"); w = torch.randn(8, 3, 3, 3, device="cuda")
        out["cudnn first"] = ms(lambda: torch.nn.functional.conv2d(x, w))
    x = torch.randn(16, 64, 256, 256, device="cuda"); w = torch.randn(128, 64, 3, 3, device="cuda")
    suffix = " warmed" if what == "conv-warmed" else ""
    out["conv first" + suffix] = ms(lambda: torch.nn.functional.conv2d(x, w))
    out["conv second" + suffix] = ms(lambda: torch.nn.functional.conv2d(x, w))
elif what in ("poison-empty", "poison-inplace"):
    from kz_core.evaluate import execution
    sizes = [1 << 20, 3 << 20, 17 << 20, 130 << 20, 600 << 20]
    held, total = [], 0
    while total < cached_gb * (1 << 30):
        for size in sizes:
            held.append(torch.empty(size, dtype=torch.uint8, device="cuda")); total += size
        held.append(torch.empty(int(1.5 * (1 << 30)), dtype=torch.uint8, device="cuda")); total += int(1.5 * (1 << 30))
    del held
    def empty_first():
        torch.cuda.empty_cache()
        large = torch.empty(256 << 20, dtype=torch.uint8, device="cuda").fill_(255)
        small = [torch.empty(1 << 20, dtype=torch.uint8, device="cuda").fill_(255) for _ in range(32)]
        del large, small
    def redraw():  # what the next trial allocates: inputs of the size freed
        again = [torch.empty(int(1.5 * (1 << 30)), dtype=torch.uint8, device="cuda") for _ in range(int(cached_gb // 2) or 1)]
        del again
    if what == "poison-empty":
        out["poison empty"] = ms(empty_first)
        out["poison empty, then the next inputs"] = ms(redraw)
    else:
        out["poison in place"] = ms(lambda: execution.poison_free_memory("cuda", 256))
        out["poison in place, then the next inputs"] = ms(redraw)
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cached-gb", type=float, default=8.0)
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TRITON_CACHE_DIR": cache}  # empty: the first "checks" compiles
        runs = [("checks", " (cold cache)")] + [("checks", " (warm cache)")] * args.repeat
        for what in ("fingerprint", "libraries", "conv", "conv-warmed", "poison-empty", "poison-inplace"):
            runs += [(what, "")] * args.repeat
        for what, label in runs:
            done = subprocess.run([sys.executable, "-c", PROBE, what, str(args.cached_gb)], capture_output=True, text=True, env=env)
            if done.returncode:
                print(f"{what}: failed\n{done.stderr[-2000:]}")
                continue
            for name, value in json.loads(done.stdout.strip().splitlines()[-1]).items():
                results.setdefault(name + (label if name != "context" else ""), []).append(value)
    for name, values in results.items():
        if values:
            print(f"{name:45s} {statistics.median(values):9.1f} ms  (of {len(values)}: {', '.join(f'{v:.1f}' for v in values)})")


if __name__ == "__main__":
    main()
