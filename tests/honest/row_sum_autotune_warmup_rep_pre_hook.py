# problem: 4_row_sum
# style: split-row atomics autotuned over BLOCK with a triton.Config pre_hook that zeroes the output through nargs (Triton's documented way for split-K kernels), so the host launches into torch.empty and the hook's zero_() runs before every launch; warmup/rep given to autotune
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _zero_out(nargs):
    nargs["out_ptr"].zero_()


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 512}, num_warps=4, pre_hook=_zero_out),
        triton.Config({"BLOCK": 1024}, num_warps=8, pre_hook=_zero_out),
    ],
    key=["n_cols"],
    warmup=2,
    rep=5,
)
@triton.jit
def row_sum_atomic(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        R, C = x.shape
        out = torch.empty((R, 1), device=x.device, dtype=torch.float32)
        row_sum_atomic[lambda META: (R, triton.cdiv(C, META["BLOCK"]))](x, out, C, x.stride(0))
        return out
