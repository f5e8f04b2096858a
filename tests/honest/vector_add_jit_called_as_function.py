# problem: 1_vector_add
# style: triton.jit called as a function on a plain module-level def (`add_kernel = triton.jit(_add_body)`), as code that keeps one body for several jit options does, launched through the name it binds

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _add_body(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


add_kernel = triton.jit(_add_body)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = out.numel()
        add_kernel[(triton.cdiv(n, 512),)](a, b, out, n, BLOCK=512)
        return out
