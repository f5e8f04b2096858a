# problem: 3_row_softmax
# style: Triton's own `tl.softmax` from triton.language.standard applied to a 2-D tile of rows along dim=1 (several rows per program, padding filled with -inf), instead of a hand-written max/exp/sum
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=-float("inf"))
    y = tl.softmax(x, dim=1, keep_dims=True)  # keep_dims: Triton 3.6 (the GPU image's) drops the axis without it; 3.9 ignores it
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        ROWS = 4
        softmax_rows_kernel[(triton.cdiv(n_rows, ROWS),)](
            x, y, n_rows, n_cols, x.stride(0), y.stride(0), ROWS=ROWS, BLOCK_N=triton.next_power_of_2(n_cols))
        return y
