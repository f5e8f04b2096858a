# problem: 2_scaled_relu
# expect: rejected
# check: no_kernel_launch
# gpu_only: false
# hack: computes the first call with a correct kernel and returns that cached tensor on every later call, so a harness that checks one call and times the others (or reuses one input set) sees a correct and nearly free kernel.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_kernel(x_ptr, out_ptr, n_elements, scale, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self._cache = None

    def forward(self, x):
        if self._cache is not None and self._cache.shape == x.shape:
            return self._cache  # "memoised"
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scaled_relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, self.scale, BLOCK_SIZE=1024)
        self._cache = out
        return out
