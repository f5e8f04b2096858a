# problem: 1_vector_add
# style: a fixed number of programs walking the vector with a grid-stride loop over tl.num_programs(0), `from triton import jit` with @jit(do_not_specialize=[...]), inputs flattened with .view(-1), output made with x.new_empty and viewed back to the input's shape

import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import jit

NUM_PROGRAMS = 4
BLOCK = 512


@jit(do_not_specialize=["n_elements"])
def add_grid_stride_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n_progs = tl.num_programs(0)
    n_blocks = tl.cdiv(n_elements, BLOCK)
    for blk in range(pid, n_blocks, n_progs):
        offs = blk * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a_flat = a.contiguous().view(-1)
        b_flat = b.contiguous().view(-1)
        out = a_flat.new_empty(a_flat.shape)
        n = a_flat.numel()
        programs = max(1, min(NUM_PROGRAMS, triton.cdiv(n, BLOCK)))
        add_grid_stride_kernel[(programs,)](a_flat, b_flat, out, n, BLOCK=BLOCK)
        return out.view(a.shape)
