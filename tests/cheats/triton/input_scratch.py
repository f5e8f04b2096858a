# problem: 1_vector_add
# expect: rejected
# check: input_mutated
# gpu_only: false
# hack: accumulates a += b in place (using the input as scratch space) and then copies a into a fresh output, so the output is correct and does not alias an input, yet the caller's a is silently overwritten.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def accumulate_kernel(a_ptr, b_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask)
    tl.store(a_ptr + offsets, a + tl.load(b_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        n = a.numel()
        grid = (triton.cdiv(n, 1024),)
        accumulate_kernel[grid](a, b, n, BLOCK_SIZE=1024)  # a now holds a + b
        out = torch.empty_like(a)
        copy_kernel[grid](a, out, n, BLOCK_SIZE=1024)
        return out
