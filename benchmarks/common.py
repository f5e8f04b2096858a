"""Helpers shared by the benchmarks: versions, JSON output, KernelBench-derived candidates."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path
from typing import Any


def versions() -> dict[str, str]:
    import importlib.metadata

    import torch

    found = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("triton", "cuda-python", "kz-core"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    if torch.cuda.is_available():
        found["device"] = torch.cuda.get_device_name(0)
        found["cuda"] = str(torch.version.cuda)
    else:
        found["device"] = platform.processor() or "cpu"
    return found


def write_json(path: str | None, data: dict[str, Any], quiet: bool = False) -> None:
    """``data`` as JSON into ``path`` (when given), and on standard output unless ``quiet``."""
    text = json.dumps(data, indent=2)
    if not quiet:
        print(text)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")


COPY_KERNEL = '''

import triton
import triton.language as tl


@triton.jit
def _kz_copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    # src_ptr, dst_ptr: contiguous buffers of n elements; one program copies BLOCK of them.
    # 64-bit offsets: KernelBench level 1 has outputs past 2**31 elements (the size
    # variation trial makes them larger still), where int32 offsets wrap around.
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def _kz_copy(t):
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return t
    src = t.contiguous()
    dst = torch.empty_like(src)
    _kz_copy_kernel[(triton.cdiv(src.numel(), 1024),)](src, dst, src.numel(), BLOCK=1024)
    return dst


class ModelNew(_KzReference):
    def forward(self, *args):
        out = super().forward(*args)
        if isinstance(out, (tuple, list)):
            return type(out)(_kz_copy(t) for t in out)
        return _kz_copy(out)
'''


def wrapping_candidate(problem_code: str) -> str:
    """A fixed, benchmark-only candidate: the reference computed by torch, its output
    copied through a Triton kernel. Rejected by the strict guard (torch computes); with
    ``eval.guards=warn`` it is correct and timed, exercising every stage."""
    renamed = re.sub(r"\bModel\b", "_KzReference", problem_code)
    return renamed + COPY_KERNEL


def kernelbench_problems(path: str, level: int, ids: str = "") -> list[Any]:
    """The problems of ``level`` in ``path`` (any problem source kz reads: KernelBench's
    JSONL, a folder such as ``examples``); level 0: every problem, whatever its level;
    ``ids``: only these problem ids, numbers and ranges (e.g. ``1-18,95``)."""
    from kz_core.problems import load_problems

    return list(load_problems(path, level=level or None, ids=ids).problems)
