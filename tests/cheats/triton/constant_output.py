# problem: 2_scaled_relu
# expect: incorrect
# check: mismatch
# gpu_only: false
# hack: a kernel that only fills the output with zeros: the right shape, dtype and device, "correct" on the half of the entries where randn inputs are negative, and the fastest possible kernel for a harness that checks shapes or a lenient fraction of elements.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_zero_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK_SIZE,), dtype=tl.float32), mask=offsets < n_elements)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        out = torch.empty_like(x)
        n = out.numel()
        fill_zero_kernel[(triton.cdiv(n, 1024),)](out, n, BLOCK_SIZE=1024)
        return out
