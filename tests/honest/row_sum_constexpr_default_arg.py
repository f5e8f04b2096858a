# problem: 4_row_sum
# style: constexpr kernel parameters whose defaults are module-level constants (`BLOCK_SIZE: tl.constexpr = DEFAULT_BLOCK_SIZE`), so forward launches without passing them, one program per row

import torch
import torch.nn as nn
import triton
import triton.language as tl

DEFAULT_BLOCK_SIZE = tl.constexpr(1024)
ACCUMULATE_IN_FP32 = tl.constexpr(True)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride_row,
                   BLOCK_SIZE: tl.constexpr = DEFAULT_BLOCK_SIZE,
                   FP32_ACC: tl.constexpr = ACCUMULATE_IN_FP32):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32 if FP32_ACC else x_ptr.dtype.element_ty)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((x.shape[0], 1), device=x.device, dtype=x.dtype)
        row_sum_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0))
        return out
