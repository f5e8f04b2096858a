# problem: 2_scaled_relu
# style: the kernel wrapped in a torch.autograd.Function with forward and backward (as training-ready published kernels are: Liger, FlagGems), called through .apply; ctx.save_for_backward of the input
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _fwd(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.where(x > 0, x * scale, 0.0), mask=m)


@triton.jit
def _bwd(x_ptr, dy_ptr, dx_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    dy = tl.load(dy_ptr + offs, mask=m)
    tl.store(dx_ptr + offs, tl.where(x > 0, dy * scale, 0.0), mask=m)


class ScaledReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _fwd[(triton.cdiv(n, 1024),)](x, y, n, scale, BLOCK=1024)
        ctx.save_for_backward(x)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.empty_like(x)
        n = x.numel()
        _bwd[(triton.cdiv(n, 1024),)](x, dy, dx, n, ctx.scale, BLOCK=1024)
        return dx, None


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return ScaledReLUFunction.apply(x, self.scale)
