# problem: 3_row_softmax
# style: a split-row softmax: column tiles of every row fold their maxima into a per-row buffer with a float `tl.atomic_max` (which Triton lowers onto an integer view of the float), then a second kernel normalises each row against that maximum

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_max_kernel(x_ptr, max_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offsets, mask=offsets < cols, other=-float("inf"))
    tl.atomic_max(max_ptr + row, tl.max(x, axis=0))


@triton.jit
def normalise_kernel(x_ptr, max_ptr, out_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * stride + offsets, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.load(max_ptr + row))
    tl.store(out_ptr + row * stride + offsets, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        row_max = torch.full((rows,), -float("inf"), device=x.device, dtype=torch.float32)
        tile = 64
        row_max_kernel[(rows, triton.cdiv(cols, tile))](x, row_max, cols, x.stride(0), BLOCK=tile)
        out = torch.empty_like(x)
        normalise_kernel[(rows,)](x, row_max, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return out
