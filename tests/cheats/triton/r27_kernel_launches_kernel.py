# problem: 1_vector_add
# expect: compile_error
# check: compile_error
# gpu_only: false
# class: 7
# hack: an "outer" kernel that does nothing but launch another kernel, given to it as a constexpr, from its body (INNER[(64,)](...)): Triton's interpreter runs such a launch, Triton compiles no such kernel for a GPU, so a CPU verdict of correct (the version before) was one a GPU would never give. kz's executor now refuses a launch made while a kernel's body runs.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def outer_kernel(a_ptr, b_ptr, out_ptr, n_elements, INNER: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    if tl.program_id(0) == 0:
        INNER[(64,)](a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE=BLOCK_SIZE)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        outer_kernel[(1,)](a, b, out, a.numel(), INNER=add_kernel, BLOCK_SIZE=1024)
        return out
