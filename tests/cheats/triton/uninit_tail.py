# problem: 1_vector_add
# expect: incorrect
# check: mismatch|non_finite
# gpu_only: false
# hack: the grid is n // BLOCK_SIZE (rounded down), so the last 904 of 5000 outputs are never written and keep whatever torch.empty returned, which is often the reference's freed output of the same size and so looks correct.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.empty_like(a)
        n = a.numel()
        add_kernel[(n // 1024,)](a, b, out, n, BLOCK_SIZE=1024)  # floor, not ceil: the tail is skipped
        return out
