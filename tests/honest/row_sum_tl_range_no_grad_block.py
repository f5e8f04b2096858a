# problem: 4_row_sum
# style: one program per row looping with tl.range over the columns, fp32 accumulation cast back with .to(out_ptr.dtype.element_ty), `with torch.no_grad():` in forward, output from torch.empty with device and dtype keywords, strides passed
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride_row, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in tl.range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0)
        acc += x.to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + row * stride_out, total.to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            x = x.contiguous()
            rows, cols = x.shape
            out = torch.empty((rows, 1), device=x.device, dtype=x.dtype)
            row_sum_kernel[(rows,)](x, out, cols, x.stride(0), out.stride(0), BLOCK=1024)
        return out
