"""What the evaluator's steps cost on a KernelBench level-1 sized tensor, one at a time.

The throughput benchmark says how long each worker request takes (``executor execute``,
``reference compare`` ...); this says what those requests are made of, on an idle GPU:
allocating and freeing gigabyte blocks through the caching allocator and the driver,
drawing inputs, cloning, poisoning, fingerprints, CUDA IPC between two processes, kz's
output comparison. Usage (on a machine with a CUDA GPU):

    python benchmarks/gpu_primitives.py --gb 6.44 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHILD = r"""
import pickle, sys, time, torch
from kz_core.evaluate.execution import open_shared_cuda_tensor
torch.cuda.init(); torch.empty(1, device="cuda")
for line in sys.stdin.buffer:
    description = pickle.loads(bytes.fromhex(line.decode().strip()))
    started = time.perf_counter()
    copy = open_shared_cuda_tensor(description)
    torch.cuda.synchronize()
    opened = time.perf_counter() - started
    del copy
    torch.cuda.empty_cache()
    sys.stdout.write(f"{opened}\n"); sys.stdout.flush()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=6.44, help="size of one tensor (KernelBench's activations: 4096 x 393216 float32)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the table here")
    args = parser.parse_args()

    import torch

    from common import versions
    from kz_core.evaluate.correctness import Tolerance, compare
    from kz_core.evaluate.execution import bitwise_equal, fingerprint, poison_free_memory, share_cuda_tensor

    numel = int(args.gb * 1e9) // 4
    device = "cuda"
    torch.empty(1, device=device)
    results: dict[str, list[float]] = {}

    def timed(name: str, fn):
        torch.cuda.synchronize()
        started = time.perf_counter()
        value = fn()
        torch.cuda.synchronize()
        results.setdefault(name, []).append(time.perf_counter() - started)
        return value

    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=False)
    for _ in range(args.repeats):
        torch.cuda.empty_cache()
        x = timed("allocate (driver: cudaMalloc)", lambda: torch.empty(numel, device=device))
        timed("first write (fill_)", lambda: x.fill_(1.0))
        timed("second write (fill_)", lambda: x.fill_(2.0))
        del x
        timed("free and give back (empty_cache)", torch.cuda.empty_cache)
        generator = torch.Generator(device=device).manual_seed(1)
        x = timed("draw inputs (randn, fresh block)", lambda: torch.randn(numel, device=device, generator=generator))
        timed("fingerprint (device sums)", lambda: fingerprint([x]))
        original = timed("clone (fresh block)", lambda: x.clone())
        timed("bitwise equal", lambda: bitwise_equal(x, original))
        timed("poison free memory (256 MB)", lambda: poison_free_memory(device, 256))
        y = timed("relu (fresh block)", lambda: torch.relu(x))
        del original
        torch.cuda.synchronize()
        z = timed("relu (cached block)", lambda: torch.relu(x))
        del z
        description = timed("share (IPC handle)", lambda: share_cuda_tensor(y))
        started = time.perf_counter()
        child.stdin.write((pickle.dumps(description).hex() + "\n").encode())
        child.stdin.flush()
        opened = float(child.stdout.readline())
        results.setdefault("open and clone in another process (child's own time)", []).append(opened)
        results.setdefault("open and clone in another process (round trip)", []).append(time.perf_counter() - started)
        want = torch.relu(x)
        timed("kz compare (float32, chunked, float64 errors)", lambda: compare(want, y, Tolerance(1e-4, 1e-4), "output"))
        del want, y, x
        timed("free all and give back (empty_cache)", torch.cuda.empty_cache)
    child.stdin.close()
    child.wait()
    rows = [(name, statistics.median(values), max(values)) for name, values in results.items()]
    print(f"{args.gb} GB per tensor ({numel} float32), {args.repeats} repeats; {versions()}")
    print("| step | median s | max s |")
    print("| --- | ---: | ---: |")
    for name, median, worst in rows:
        print(f"| {name} | {median:.4f} | {worst:.4f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"gb": args.gb, "rows": rows, "versions": versions()}, indent=1))


if __name__ == "__main__":
    main()
