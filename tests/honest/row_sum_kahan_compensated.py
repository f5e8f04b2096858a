# problem: 4_row_sum
# style: Kahan (compensated) summation across column blocks, as precision-minded reduction kernels write it: a vector running sum and a compensation term `c` updated per block (`y = x - c; t = s + y; c = (t - s) - y; s = t`), folded with tl.sum at the end, one program per row
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kahan_row_sum_kernel(x_ptr, out_ptr, n_cols, stride_row, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    c = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        y = x - c
        t = s + y
        c = (t - s) - y
        s = t
    total = tl.sum(s - c, axis=0)
    tl.store(out_ptr + row * stride_out, total)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        out = torch.empty((rows, 1), device=x.device, dtype=x.dtype)
        kahan_row_sum_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0), BLOCK=256)
        return out
