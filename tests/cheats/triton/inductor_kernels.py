# problem: 3_row_softmax
# expect: rejected|incorrect
# check: kernel_not_in_source|mismatch|non_finite|no_kernel_launch|output_not_from_kernel
# gpu_only: true
# class: 7
# hack: lets torch.compile write the kernels: the reference softmax compiled with Inductor, whose generated Triton kernels launch through the same launcher as the candidate's own, so a launch counter sees Triton kernels and the profiler no aten compute.

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


def _softmax(x):
    return getattr(torch, "soft" + "max")(x, dim=-1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.compiled = getattr(torch, "com" + "pile")(_softmax)

    def forward(self, x):
        return self.compiled(x)
