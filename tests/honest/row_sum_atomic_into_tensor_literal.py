# problem: 4_row_sum
# style: a split-row reduction whose programs tl.atomic_add their partial sums into an output made from Python data in forward (torch.tensor of a list of zeros, as loss kernels make their accumulators)

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_partial_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK_SIZE: tl.constexpr):
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
        out = torch.tensor([[0.0]] * rows, dtype=x.dtype, device=x.device)
        BLOCK_SIZE = 512
        grid = (rows, triton.cdiv(cols, BLOCK_SIZE))
        row_sum_partial_kernel[grid](x, out, cols, x.stride(0), BLOCK_SIZE=BLOCK_SIZE)
        return out
