# problem: 6_linear_gelu
# expect: rejected
# check: reference_reuse
# gpu_only: false
# hack: ModelNew builds the reference Model inside itself (the shared seed gives it the reference's exact weights) and runs it, then pushes the result through a token Triton copy, so outputs match bit for bit without any kernel doing the layer.

import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    """A linear layer followed by GELU (tanh approximation): a small fusion problem."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh")


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.reference = Model(in_features, out_features)  # first parameters created: same weights

    def forward(self, x):
        y = self.reference(x).contiguous()
        out = torch.empty_like(y)
        copy_kernel[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK_SIZE=1024)
        return out
