# problem: 4_row_sum
# expect: incorrect
# check: mismatch|non_finite
# gpu_only: false
# hack: a split-row reduction atomically adds partial sums into a torch.empty output that was never zeroed; freshly mapped memory usually is zero, so it passes a naive harness, but the result depends on whatever the buffer held.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_split_kernel(in_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    cols = chunk * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))  # out[row] += partial sum


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty((n_rows, 1), dtype=x.dtype, device=x.device)  # should be torch.zeros
        grid = (n_rows, triton.cdiv(n_cols, 1024))
        row_sum_split_kernel[grid](x, out, n_cols, BLOCK_SIZE=1024)
        return out
