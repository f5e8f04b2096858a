# problem: 1_vector_add
# style: the kernel kept in the module's class as a @staticmethod above @triton.jit, launched through self, as programs evolved by search (DLBlas) lay theirs out

import torch
import torch.nn as nn
import triton
import triton.language as tl


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    @staticmethod
    @triton.jit
    def _add(a_ptr, b_ptr, out_ptr, total, TILE: tl.constexpr):
        idx = tl.program_id(0) * TILE + tl.arange(0, TILE)
        keep = idx < total
        tl.store(out_ptr + idx, tl.load(a_ptr + idx, mask=keep) + tl.load(b_ptr + idx, mask=keep), mask=keep)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        total = out.numel()
        self._add[(triton.cdiv(total, 256),)](a, b, out, total, TILE=256)
        return out
