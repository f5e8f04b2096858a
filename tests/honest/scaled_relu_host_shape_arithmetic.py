# problem: 2_scaled_relu
# style: the wrapper does its host arithmetic with small torch tensors, as some published kernels do: the element count as torch.prod over a CPU tensor of the shape, the scale through torch.tensor and torch.as_tensor, read back with int() and float()

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scaled_relu(src, dst, count, factor, BLOCK: tl.constexpr):
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = lanes < count
    v = tl.load(src + lanes, mask=inside, other=0.0)
    tl.store(dst + lanes, tl.maximum(v, 0.0) * factor, mask=inside)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        count = int(torch.prod(torch.tensor(list(x.shape), dtype=torch.int64, device="cpu")))
        factor = float(torch.as_tensor(self.scale, dtype=torch.float64) * 1.0)
        out = torch.empty_like(x)
        _scaled_relu[(triton.cdiv(count, 512),)](x, out, count, factor, BLOCK=512)
        return out
