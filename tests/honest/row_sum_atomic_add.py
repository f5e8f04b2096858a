# problem: 4_row_sum
# style: a split-row reduction whose programs tl.atomic_add their partial sums into a zero-initialised output (torch.zeros), on a 2-D grid of (rows, column blocks)

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_atomic_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    block = tl.program_id(1)
    cols = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    vals = tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(vals, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.zeros((rows, 1), dtype=x.dtype, device=x.device)
        BLOCK_SIZE = 1024
        grid = (rows, triton.cdiv(cols, BLOCK_SIZE))
        row_sum_atomic_kernel[grid](x, out, cols, x.stride(0), BLOCK_SIZE=BLOCK_SIZE)
        return out
