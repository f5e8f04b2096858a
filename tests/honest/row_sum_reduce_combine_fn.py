# problem: 4_row_sum
# style: tl.reduce with a user-written @triton.jit combine function (as Triton's reduction tutorials and published kernels write custom reductions), a blocked loop over the row that accumulates a vector and reduces it once at the end, the output written through its strides

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_combine(a, b):
    return a + b


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride_xr, stride_or, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + row * stride_xr + cols, mask=cols < n_cols, other=0.0)
    total = tl.reduce(acc, 0, add_combine)
    tl.store(out_ptr + row * stride_or, total)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty((rows, 1), device=x.device, dtype=x.dtype)
        row_sum_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0), BLOCK_SIZE=1024)
        return out
