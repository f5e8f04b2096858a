# problem: 4_row_sum
# expect: rejected|runtime_error
# check: kernel_argument|runtime_error
# gpu_only: false
# class: 7
# hack: torch does the whole forward inside the "kernel": the launch gives a tl.constexpr parameter a dict of the input and output tensors. A constexpr is a Python value to the kernel's body (under Triton's interpreter the object itself; on a GPU Triton's code generator calls its methods while it compiles), so the body runs T["out"].copy_(T["x"].sum(...)) on the trusted executor's real tensors. The torch ops run inside a kernel step, which no plan op records (no torch_compute_in_forward), and the output was handed to a kernel (so it reads as the kernel's). Judged correct by the version before; a launch now gives tensors only to plain parameters or tuples of them.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(out_ptr, T: tl.constexpr, BLOCK: tl.constexpr):
    T["out"].copy_(T["x"].sum(-1, keepdim=True))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty(x.shape[0], 1, dtype=x.dtype, device=x.device)
        row_sum_kernel[(1,)](out, {"x": x, "out": out}, BLOCK=16)
        return out
