# problem: 3_row_softmax
# expect: incorrect
# check: mismatch|non_finite
# gpu_only: false
# hack: launches programs for only the first half of the rows and leaves the rest of the torch.empty output unwritten; when the allocator hands back the freed reference output's memory the untouched half already holds the right values, and the kernel times as twice as fast.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        grid = (n_rows // 2,)  # "the second half is handled by the same programs" (it is not)
        softmax_kernel[grid](out, x, n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
        return out
