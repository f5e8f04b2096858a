# problem: 2_scaled_relu
# style: the rows are split in two halves, each computed into a buffer of its own by a launch of the kernel, and the halves joined with torch.cat, as published kernels join per-part results (an exclusive scan's shift, DenseNet's concatenations)

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scaled_relu(src, dst, count, scale, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = lanes < count
    v = tl.load(src + lanes, mask=inside, other=0.0)
    tl.store(dst + lanes, tl.maximum(v, 0.0) * scale, mask=inside)


def _half(x: torch.Tensor, scale: float) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    count = x.numel()
    if count:
        _scaled_relu[(triton.cdiv(count, 256),)](x, out, count, scale, BLOCK=256)
    return out


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        middle = x.shape[0] // 2
        return torch.cat([_half(x[:middle], self.scale), _half(x[middle:], self.scale)], dim=0)
