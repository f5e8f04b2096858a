# problem: 1_vector_add
# expect: incorrect
# check: size_variation
# gpu_only: false
# hack: the length 5000 is baked into the kernel as a constant and the grid is sized for it, so the kernel is exactly right at the default size and silently wrong (or out of bounds) for any other length; only varying the sizes exposes it.

import torch
import torch.nn as nn
import triton
import triton.language as tl

N_ELEMENTS = 5000  # the problem's default length, not the input's


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < 5000
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        out = torch.empty_like(a)
        add_kernel[(5,)](a, b, out, BLOCK_SIZE=1024)  # 5 * 1024 >= 5000
        return out
