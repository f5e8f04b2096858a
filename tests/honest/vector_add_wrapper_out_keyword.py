# problem: 1_vector_add
# style: a wrapper function taking an optional out= tensor and checking shapes with assert, kernel with a 2-D launch grid (second axis of size 1), BLOCK from a module constant through a lambda grid
from typing import Optional

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 256


@triton.jit
def _add(a_ptr, b_ptr, c_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    m = offsets < n
    tl.store(c_ptr + offsets, tl.load(a_ptr + offsets, mask=m) + tl.load(b_ptr + offsets, mask=m), mask=m)


def add(a: torch.Tensor, b: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    assert a.shape == b.shape, "shapes differ"
    if out is None:
        out = torch.empty_like(a)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]), 1)  # noqa: E731
    _add[grid](a, b, out, n, BLOCK_SIZE=BLOCK_SIZE)
    return out


class ModelNew(nn.Module):
    def forward(self, a, b):
        return add(a.contiguous(), b.contiguous())
