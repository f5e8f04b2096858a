# problem: 4_row_sum
# style: each row's values sorted by `tl.sort` before they are summed (an accuracy habit: small terms first; Triton's sort compares floats through integer views of them), the padding filled with zeros that sort among the values
# gpu_only: true (Triton's interpreter sorts a 4096-element block in about 7 s, 233 s for the problem's 32 rows; the interpreter's path is covered by plugins/backend_triton/tests/test_trusted.py)

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sorted_row_sum_kernel(x_ptr, out_ptr, cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offsets, mask=offsets < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(tl.sort(x), axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, 1, device=x.device, dtype=x.dtype)
        sorted_row_sum_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return out
