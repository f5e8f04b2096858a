# problem: 1_vector_add
# style: forward reaches its launch through 900 nested Python frames (a dispatcher that recurses before it launches; a plain script runs it within Python's default limit of 1000, and kz's worker holds about 150 frames of its own below a forward)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m), mask=m)


def _dispatch(depth, a, b, c):
    if depth > 0:
        return _dispatch(depth - 1, a, b, c)
    n = a.numel()
    add_kernel[(triton.cdiv(n, 1024),)](a, b, c, n, BLOCK=1024)
    return c


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _dispatch(900, a, b, torch.empty_like(a))
