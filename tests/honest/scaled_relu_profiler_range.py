# problem: 2_scaled_relu
# style: the launch inside torch.profiler.record_function (a named range for the profiler, as instrumented kernels carry), the kernel a @triton.jit helper called from the main kernel
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_scale(x, scale):
    return tl.maximum(x, 0.0) * scale


@triton.jit
def kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, _relu_scale(tl.load(x_ptr + offs, mask=m), scale), mask=m)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        with torch.profiler.record_function("scaled_relu_triton"):
            x = x.contiguous()
            y = torch.empty_like(x)
            n = x.numel()
            kernel[(triton.cdiv(n, 512),)](x, y, n, self.scale, BLOCK=512)
        return y
