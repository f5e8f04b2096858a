# problem: 4_row_sum
# expect: incorrect|runtime_error
# check: shape|runtime_error|not_replayable|mismatch
# gpu_only: false
# class: 8
# hack: returns a 1 GiB tensor (256M float32 values) where the reference returns a vector of row sums: a harness that moves every output to its judge grows by a gigabyte per trial.

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # a_ptr, b_ptr, out_ptr: contiguous vectors of n_elements; one program adds BLOCK_SIZE of them.
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Copies n_elements contiguous values: the kernel a cheat launches so that "a kernel ran".
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        huge = torch.empty(1 << 28, dtype=torch.float32, device=x.device)
        copy_kernel[(1,)](x.contiguous(), huge, 16, BLOCK_SIZE=16)
        return huge
