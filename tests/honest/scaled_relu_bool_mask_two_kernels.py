# problem: 2_scaled_relu
# style: a first kernel writes where the input is positive into a `torch.bool` tensor, a second reads that mask (Triton loads a bool tensor through an int8 view of its pointer) and scales the kept values, as code that keeps a mask for a backward pass does

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def positive_kernel(x_ptr, mask_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    tl.store(mask_ptr + offsets, tl.load(x_ptr + offsets, mask=inside) > 0, mask=inside)


@triton.jit
def masked_scale_kernel(x_ptr, mask_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    keep = tl.load(mask_ptr + offsets, mask=inside, other=0)
    x = tl.load(x_ptr + offsets, mask=inside, other=0.0)
    tl.store(out_ptr + offsets, tl.where(keep, x * scale, 0.0), mask=inside)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        keep = torch.empty(x.shape, dtype=torch.bool, device=x.device)
        out = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)
        positive_kernel[grid](x, keep, n, BLOCK=1024)
        masked_scale_kernel[grid](x, keep, out, n, self.scale, BLOCK=1024)
        return out
