# problem: 3_row_softmax
# style: two kernels launched in sequence through an intermediate buffer (row maxima, then exponentiate-sum-normalise), both defined under a module-level `if` guard, int64 row offsets, masks with other=-float('inf'), a reshape to 2-D and out.view(x.shape) on return

import torch
import torch.nn as nn
import triton
import triton.language as tl

USE_TRITON = True

if USE_TRITON:

    @triton.jit
    def row_max_kernel(x_ptr, max_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        base = x_ptr + row * stride_x
        m = tl.full((BLOCK,), -float('inf'), tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(base + cols, mask=cols < n_cols, other=-float('inf'))
            m = tl.maximum(m, v.to(tl.float32))
        tl.store(max_ptr + row, tl.max(m, axis=0))

    @triton.jit
    def normalize_kernel(x_ptr, max_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        row_max = tl.load(max_ptr + row)
        x_row = x_ptr + row * stride_x
        y_row = y_ptr + row * stride_y
        denom = tl.zeros((BLOCK,), tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(x_row + cols, mask=cols < n_cols, other=-float('inf'))
            denom += tl.exp(v.to(tl.float32) - row_max)
        total = tl.sum(denom, axis=0)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            v = tl.load(x_row + cols, mask=mask, other=-float('inf'))
            out = tl.exp(v.to(tl.float32) - row_max) / total
            tl.store(y_row + cols, out.to(y_ptr.dtype.element_ty), mask=mask)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    n_rows = x2.shape[0]
    row_max = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    y = torch.empty_like(x2)
    BLOCK = min(triton.next_power_of_2(n_cols), 512)
    row_max_kernel[(n_rows,)](x2, row_max, n_cols, x2.stride(0), BLOCK=BLOCK)
    normalize_kernel[(n_rows,)](x2, row_max, y, n_cols, x2.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=4)
    return y.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        nn.Module.__init__(self)

    def forward(self, x):
        return triton_softmax(x)
