# problem: 4_row_sum
# style: a split reduction in two kernels: a 2-D grid (rows x column chunks) writing partial sums to an intermediate torch.empty buffer, then a second kernel reducing the partials, the (rows, 1) output made with .view(-1, 1)

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partial_sum_kernel(x_ptr, partial_ptr, n_cols, stride_xr, n_chunks, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    cols = chunk * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * stride_xr + cols, mask=cols < n_cols, other=0.0)
    tl.store(partial_ptr + row * n_chunks + chunk, tl.sum(x.to(tl.float32), axis=0))


@triton.jit
def final_sum_kernel(partial_ptr, out_ptr, n_chunks, CHUNKS_POW2: tl.constexpr):
    row = tl.program_id(0)
    idx = tl.arange(0, CHUNKS_POW2)
    p = tl.load(partial_ptr + row * n_chunks + idx, mask=idx < n_chunks, other=0.0)
    tl.store(out_ptr + row, tl.sum(p, axis=0))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n_rows, n_cols = x.shape
    BLOCK_SIZE = 1024
    n_chunks = triton.cdiv(n_cols, BLOCK_SIZE)
    partial = torch.empty((n_rows, n_chunks), device=x.device, dtype=torch.float32)
    partial_sum_kernel[(n_rows, n_chunks)](x, partial, n_cols, x.stride(0), n_chunks, BLOCK_SIZE=BLOCK_SIZE)
    out = torch.empty(n_rows, device=x.device, dtype=x.dtype)
    final_sum_kernel[(n_rows,)](partial, out, n_chunks, CHUNKS_POW2=triton.next_power_of_2(n_chunks))
    return out.view(-1, 1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return row_sum(x)
