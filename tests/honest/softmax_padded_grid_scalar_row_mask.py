# problem: 3_row_softmax
# style: flash-linear-attention's way with a grid padded past the rows: programs in multiples of four, each row's mask written `(cols < N) & (row < M)`, a block mask joined with a scalar test; under Triton's CPU interpreter the scalar comparison was broadcast as integers and the load refused the mask ("mask has unsupported dtype", over-rejection probe 22)

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows_kernel(x_ptr, y_ptr, M, N, stride_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = (cols < N) & (row < M)
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=float("-inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * stride_row + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        M, N = x.shape
        y = torch.empty_like(x)
        softmax_rows_kernel[(triton.cdiv(M, 4) * 4,)](x, y, M, N, x.stride(0), BLOCK_N=triton.next_power_of_2(N))
        return y
