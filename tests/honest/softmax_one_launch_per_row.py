# problem: 3_row_softmax
# style: a Python loop in forward launching one single-program kernel per row (many launches per call), each given a row's views as pointers
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_one_row(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[1])
        for i in range(x.shape[0]):
            softmax_one_row[(1,)](x[i], y[i], x.shape[1], BLOCK=block)
        return y
