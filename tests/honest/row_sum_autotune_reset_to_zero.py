# problem: 4_row_sum
# style: column blocks of a row summed with tl.atomic_add into a zeroed output, autotuned over block sizes with reset_to_zero naming the output (Triton zeroes it between its benchmark runs), the output zeroed by torch.zeros before the launch
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 512}, num_warps=4)],
    key=["n_cols"],
    reset_to_zero=["out_ptr"],
)
@triton.jit
def partial_row_sum(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    cols = blk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.zeros((rows, 1), device=x.device, dtype=torch.float32)
        grid = lambda meta: (rows, triton.cdiv(cols, meta["BLOCK"]))  # noqa: E731
        partial_row_sum[grid](x, out, cols, x.stride(0))
        return out
