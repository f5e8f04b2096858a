"""Triton candidate for 4_row_sum: sum over the last dimension, keeping it, one program per row.

A program walks its row in BLOCK_SIZE chunks, adding each chunk into a BLOCK_SIZE-wide fp32
accumulator, and reduces the accumulator once at the end. Rows of any length work. What it
must not do: use torch for the sum, or assume the row fits one block (3000 columns does not).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(
    in_ptr,  # input: n_rows rows of n_cols values, contiguous within a row
    out_ptr,  # output: n_rows values, one per row (the kept dimension has size 1)
    in_row_stride,  # elements between the starts of two consecutive input rows
    n_cols,  # length of each row (the summed dimension)
    BLOCK_SIZE: tl.constexpr,  # columns loaded per step; a power of two
):
    row = tl.program_id(axis=0)
    row_in = in_ptr + row * in_row_stride
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)  # (BLOCK_SIZE,) per-lane partial sums
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,)
        # Masked lanes read 0, the identity of the sum.
        x = tl.load(row_in + cols, mask=cols < n_cols, other=0.0)
        acc += x.to(tl.float32)
    total = tl.sum(acc, axis=0)  # 0-d: the row's sum
    tl.store(out_ptr + row, total.to(out_ptr.dtype.element_ty))


# 1024 columns per step: long enough loads to stream memory well, and a per-program register
# footprint that stays fixed however long the row is (3000 columns take 3 steps).
MAX_BLOCK_SIZE = 1024


def row_sum(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.contiguous().view(-1, n_cols)  # (n_rows, n_cols): leading dimensions flattened
    n_rows = x2.shape[0]
    out = torch.empty(x.shape[:-1] + (1,), dtype=x.dtype, device=x.device)  # (..., 1)
    if n_rows == 0:
        return out
    block_size = min(triton.next_power_of_2(max(n_cols, 1)), MAX_BLOCK_SIZE)
    # One program per row: rows are independent and each row's sum is reduced in one program.
    grid = (n_rows,)
    row_sum_kernel[grid](x2, out, x2.stride(0), n_cols, BLOCK_SIZE=block_size)
    return out


class ModelNew(nn.Module):
    """Sum over the last dimension, keeping it: (rows, cols) -> (rows, 1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_sum(x)


if __name__ == "__main__":
    for shape in ((32, 3000), (7, 5), (2, 3, 1025)):
        x = torch.randn(shape)
        torch.testing.assert_close(ModelNew()(x), x.sum(dim=-1, keepdim=True), atol=1e-4, rtol=1e-4)
    print("4_row_sum: ok")
