"""What the trusted side's checks of one call cost on a GPU, for an output the size of
KernelBench's level-1 activations (4096 x 393216 float32, 6.4 GB): drawing the input,
fingerprinting it, keeping a copy and poisoning free memory, comparing the output with the
reference's, and the reference's own forward (the physical floor of a call).

    python benchmarks/check_costs.py [--rows 4096] [--cols 393216] [--repeat 3]

Prints one line per phase: milliseconds (median of --repeat) and GB/s over the bytes the
phase must at least read.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from kz_core.evaluate import correctness, execution
from kz_core.evaluate.correctness import compare, tolerance_for
from kz_core.evaluate.execution import bitwise_equal, fingerprint, poison_free_memory


def with_torch_ops(fn):
    """``fn`` with the checks' Triton kernels switched off (the torch operations instead)."""

    def run():
        saved = correctness.DEVICE_KERNEL_ELEMENTS, execution._FINGERPRINT_KERNEL_WORDS
        correctness.DEVICE_KERNEL_ELEMENTS = execution._FINGERPRINT_KERNEL_WORDS = 1 << 62
        try:
            return fn()
        finally:
            correctness.DEVICE_KERNEL_ELEMENTS, execution._FINGERPRINT_KERNEL_WORDS = saved

    return run


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        started = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=393216)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    device = "cuda"
    shape = (args.rows, args.cols)
    x = torch.randn(shape, device=device)
    want = torch.relu(x)
    got = want.clone()
    nbytes = x.nbytes
    tolerance = tolerance_for(torch.float32)
    phases = {
        "draw input (randn)": (lambda: torch.randn(shape, device=device), nbytes),
        "reference forward (relu)": (lambda: torch.relu(x), 2 * nbytes),
        "fingerprint (torch ops)": (with_torch_ops(lambda: fingerprint([x])), nbytes),
        "fingerprint (kernel)": (lambda: fingerprint([x]), nbytes),
        "keep a copy (clone)": (lambda: x.clone(), 2 * nbytes),
        "poison 256 MB": (lambda: poison_free_memory(device, 256), 256 << 20),
        "bitwise equal": (lambda: bitwise_equal(x, got), 2 * nbytes),
        "compare (torch ops)": (with_torch_ops(lambda: compare(want, got, tolerance)), 2 * nbytes),
        "compare (kernel)": (lambda: compare(want, got, tolerance), 2 * nbytes),
    }
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}; tensor {shape} float32, {nbytes / 1e9:.1f} GB")
    assert with_torch_ops(lambda: fingerprint([x]))() == fingerprint([x]), "the kernel's fingerprint differs"
    assert with_torch_ops(lambda: compare(want, got, tolerance))() == compare(want, got, tolerance)
    for name, (fn, moved) in phases.items():
        fn()  # warm
        ms = timed(fn, args.repeat)
        print(f"{name:28s} {ms:9.1f} ms  {moved / ms / 1e6:8.0f} GB/s")


if __name__ == "__main__":
    main()
