# problem: 2_scaled_relu
# style: the output made as a copy of the input (x.clone()) and then transformed in place by the kernel, with the scale held as a registered buffer tensor that the kernel loads through a pointer

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_inplace_kernel(y_ptr, scale_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    scale = tl.load(scale_ptr)
    v = tl.load(y_ptr + offsets, mask=mask)
    v = tl.where(v > 0.0, v, 0.0) * scale
    tl.store(y_ptr + offsets, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.register_buffer("scale_buf", torch.tensor([scale], dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.clone(memory_format=torch.contiguous_format)  # the kernel works in place on the copy
        n = y.numel()
        BLOCK_SIZE = 2048
        scaled_relu_inplace_kernel[(triton.cdiv(n, BLOCK_SIZE),)](y, self.scale_buf, n, BLOCK_SIZE)
        return y
