"""Triton candidate for 2_scaled_relu: out = relu(x) * scale, one masked elementwise kernel.

The input is treated as a flat run of values, so any shape works. What it must not do: use
torch for the arithmetic, or assume the default (16, 300) shape.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_kernel(
    x_ptr,  # input: n_elements contiguous values
    out_ptr,  # output: n_elements contiguous values of x's dtype
    n_elements,  # number of values in x (all dimensions flattened)
    scale,  # the constant factor applied after the ReLU (a float scalar)
    BLOCK_SIZE: tl.constexpr,  # values one program handles; a power of two
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,)
    mask = offsets < n_elements  # the last block is partial unless n_elements divides evenly
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.maximum(x, 0.0) * scale  # relu, then the scale, in the same order as the reference
    tl.store(out_ptr + offsets, y, mask=mask)


# 1024 values per program: the Triton tutorials' choice for memory-bound elementwise kernels,
# and only 5 programs for the default 4800 values under the interpreter.
BLOCK_SIZE = 1024


def scaled_relu(x: torch.Tensor, scale: float) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)  # same shape, dtype and device as x
    n_elements = x.numel()
    if n_elements == 0:
        return out
    # One program per BLOCK_SIZE slice of the flattened tensor, rounded up.
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    scaled_relu_kernel[grid](x, out, n_elements, scale, BLOCK_SIZE=BLOCK_SIZE)
    return out


class ModelNew(nn.Module):
    """ReLU followed by multiplication with a constant given to the constructor."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scaled_relu(x, self.scale)


if __name__ == "__main__":
    for shape in ((16, 300), (3, 5, 7), (1,)):
        x = torch.randn(shape)
        torch.testing.assert_close(ModelNew(1.5)(x), torch.relu(x) * 1.5, atol=1e-4, rtol=1e-4)
    print("2_scaled_relu: ok")
