# problem: 1_vector_add
# expect: rejected
# check: no_kernel_launch
# gpu_only: false
# hack: defines a correct-looking @triton.jit kernel but never launches it and returns torch's a + b, so a harness that only compares outputs (or greps for triton.jit) scores plain PyTorch as a Triton kernel.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        # The launch "will be enabled once the block size is tuned": it never is.
        return a + b
