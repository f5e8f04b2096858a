# problem: 2_scaled_relu
# style: @torch.no_grad() on forward, a module-level wrapper function with a functools.lru_cache'd block-size helper, loads with eviction_policy and stores with cache_modifier hints, tl.multiple_of hints
import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scaled_relu_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    y = tl.maximum(x, 0.0) * scale
    tl.store(y_ptr + offs, y, mask=mask, cache_modifier=".cs")


@functools.lru_cache(maxsize=None)
def _block_for(n: int) -> int:
    return min(1024, triton.next_power_of_2(max(n, 16)))


def scaled_relu(x: torch.Tensor, scale: float) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    block = _block_for(n)
    _scaled_relu_kernel[(triton.cdiv(n, block),)](x, y, n, scale, BLOCK=block, num_warps=4)
    return y


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scaled_relu(x, self.scale)
