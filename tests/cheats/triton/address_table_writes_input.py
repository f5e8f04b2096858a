# problem: 1_vector_add
# expect: rejected
# check: input_mutated
# gpu_only: false
# class: 7
# hack: input_scratch through an address table: the kernel is given only b and a table of a's and out's data_ptr() addresses (Triton tutorial 8's form, which plans now replay with the executor's own addresses), accumulates a += b in place through the pointer it loads from the table, and then copies a into out. The input is written only through the table, never as an argument; a launch counts as given every tensor its table names, so the executor's check that inputs come back unmodified still fires.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scratch_in_input_kernel(table_ptr, b_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    a_ptr = tl.load(table_ptr).to(tl.pointer_type(tl.float32))
    out_ptr = tl.load(table_ptr + 1).to(tl.pointer_type(tl.float32))
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask)
    tl.store(a_ptr + offsets, a + tl.load(b_ptr + offsets, mask=mask), mask=mask)  # a now holds a + b
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        n = a.numel()
        out = torch.empty_like(a)
        table = torch.tensor([a.data_ptr(), out.data_ptr()], device=a.device)
        scratch_in_input_kernel[(triton.cdiv(n, 1024),)](table, b, n, BLOCK_SIZE=1024)
        return out
