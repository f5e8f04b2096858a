# problem: 2_scaled_relu
# style: a generic elementwise kernel taking the activation itself as a constexpr argument (a @triton.jit function passed at launch, FN=relu_scaled), as libraries build pointwise ops from one template
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_scaled(x, scale):
    return tl.maximum(x, 0.0) * scale


@triton.jit
def pointwise_kernel(x_ptr, y_ptr, n, scale, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, FN(x, scale), mask=m)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        pointwise_kernel[(triton.cdiv(n, 1024),)](x, y, n, self.scale, FN=relu_scaled, BLOCK=1024)
        return y
