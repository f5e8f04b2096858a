# problem: 4_row_sum
# style: the input padded with zeros to a whole number of blocks with F.pad (a constant pad, as convolution kernels pad their input), so that the kernel loads without masks

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _row_sum(x_ptr, out_ptr, padded_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, padded_cols, BLOCK):
        acc += tl.load(x_ptr + row * padded_cols + start + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        block = 128
        rows, cols = x.shape
        padded = F.pad(x, (0, (-cols) % block)).contiguous()
        out = torch.empty(rows, 1, device=x.device, dtype=x.dtype)
        _row_sum[(rows,)](padded, out, padded.shape[1], BLOCK=block)
        return out
