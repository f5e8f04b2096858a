# problem: 4_row_sum
# style: a looped row sum whose mask is written with Python's `not` of a comparison (`inside = not (c >= C)`), which compiled Triton turns into an element-wise logical not of the tensor

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, C, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = not (cols >= C)
        acc += tl.load(x_ptr + row * C + cols, mask=inside, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, 1, device=x.device, dtype=x.dtype)
        row_sum_kernel[(rows,)](x, out, cols, BLOCK=256)
        return out
