# problem: 1_vector_add
# style: every argument of the launch given by keyword, tensors included (kernel[grid](a_ptr=a, out_ptr=out, ...)), as many published wrappers write it

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _vadd(a_ptr, b_ptr, out_ptr, length, CHUNK: tl.constexpr):
    at = tl.program_id(0) * CHUNK + tl.arange(0, CHUNK)
    ok = at < length
    tl.store(out_ptr + at, tl.load(a_ptr + at, mask=ok) + tl.load(b_ptr + at, mask=ok), mask=ok)


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        out = torch.empty_like(a)
        length = a.numel()
        grid = lambda meta: (triton.cdiv(length, meta["CHUNK"]),)
        _vadd[grid](a_ptr=a, b_ptr=b, out_ptr=out, length=length, CHUNK=1024)
        return out
