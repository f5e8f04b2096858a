# problem: 4_row_sum
# style: TF32 switched off at module level for exact local comparisons (torch.backends.cuda.matmul.allow_tf32 = False, the default), one program per row
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.backends.cuda.matmul.allow_tf32 = False


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((x.shape[0], 1), device=x.device, dtype=x.dtype)
        row_sum_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=1024)
        return out
