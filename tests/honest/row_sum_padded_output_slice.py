# problem: 4_row_sum
# style: an output padded to a whole block of columns and returned as a slice of it (a non-contiguous view of a larger buffer), written by a 2-D kernel
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_padded(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0)
    total = tl.sum(acc, axis=0)
    lanes = tl.arange(0, 8)
    tl.store(out_ptr + row * stride_out + lanes, tl.where(lanes == 0, total, 0.0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        padded = torch.empty((x.shape[0], 8), device=x.device, dtype=x.dtype)
        row_sum_padded[(x.shape[0],)](x, padded, x.shape[1], x.stride(0), padded.stride(0), BLOCK=1024)
        return padded[:, :1]
