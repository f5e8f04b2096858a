# problem: 4_row_sum
# expect: rejected|runtime_error
# check: kernel_argument|runtime_error
# gpu_only: false
# class: 7
# hack: the second mechanism of torch inside the kernel: a plain (not constexpr) parameter given a list of the input and output tensors. Triton turns tensors into pointers, and tuples of them, but under its interpreter leaves any other object as it is, so the body receives the list and calls torch on the executor's real tensors (T[1].copy_(T[0].sum(...))); nothing in the plan shows torch computing. Judged correct by the version before; a list or dict holding a tensor is now refused at the launch.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(out_ptr, T, BLOCK: tl.constexpr):
    T[1].copy_(T[0].sum(-1, keepdim=True))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty(x.shape[0], 1, dtype=x.dtype, device=x.device)
        row_sum_kernel[(1,)](out, [x, out], BLOCK=16)
        return out
