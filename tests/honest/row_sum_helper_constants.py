# problem: 4_row_sum
# style: a helper @triton.jit device function called from the kernel, module-level tl.constexpr constants read inside the kernel, plain Python constants (rows per program, block width) used in forward to size the grid, several rows per program

import torch
import torch.nn as nn
import triton
import triton.language as tl

# Compile-time constants read by the kernels.
ACC_DTYPE: tl.constexpr = tl.float32
ZERO = tl.constexpr(0.0)

# Launch configuration (plain Python, used by forward).
ROWS_PER_PROGRAM = 4
BLOCK_COLS = 1024
NUM_WARPS = 4


@triton.jit
def _chunk_sum(row_ptr, start, n_cols, BLOCK: tl.constexpr):
    """Sum of one BLOCK-wide chunk of a row, masked at the row's end."""
    cols = start + tl.arange(0, BLOCK)
    vals = tl.load(row_ptr + cols, mask=cols < n_cols, other=ZERO)
    return tl.sum(vals.to(ACC_DTYPE), axis=0)


@triton.jit
def _row_sum(row_ptr, n_cols, BLOCK: tl.constexpr):
    total = tl.zeros((), dtype=ACC_DTYPE)
    for start in range(0, n_cols, BLOCK):
        total += _chunk_sum(row_ptr, start, n_cols, BLOCK)
    return total


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_row, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    first_row = tl.program_id(0) * ROWS
    for r in tl.static_range(ROWS):
        row = first_row + r
        if row < n_rows:
            total = _row_sum(x_ptr + row * stride_row, n_cols, BLOCK)
            tl.store(out_ptr + row, total)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty((n_rows, 1), device=x.device, dtype=x.dtype)
        block = min(BLOCK_COLS, triton.next_power_of_2(n_cols))
        grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
        row_sum_kernel[grid](x, out, n_rows, n_cols, x.stride(0), ROWS=ROWS_PER_PROGRAM, BLOCK=block, num_warps=NUM_WARPS)
        return out
