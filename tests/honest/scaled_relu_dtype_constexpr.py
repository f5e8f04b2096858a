# problem: 2_scaled_relu
# style: a torch-to-Triton dtype table at module level and the compute dtype passed to the kernel as a tl.constexpr argument (COMPUTE_DTYPE=tl.float32), the result cast back with .to(y_ptr.dtype.element_ty), as in kernels written for several input dtypes

import torch
import torch.nn as nn
import triton
import triton.language as tl

_TORCH_TO_TL = {
    torch.float32: tl.float32,
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
}


@triton.jit
def scaled_relu_kernel(x_ptr, y_ptr, n_elements, scale, COMPUTE_DTYPE: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(COMPUTE_DTYPE)
    y = tl.maximum(x, 0.0) * scale
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        # accumulate in fp32 whatever the input dtype
        compute_dtype = tl.float32 if x.dtype in (torch.float16, torch.bfloat16) else _TORCH_TO_TL[x.dtype]
        BLOCK_SIZE = 1024
        scaled_relu_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, n, self.scale, COMPUTE_DTYPE=compute_dtype, BLOCK_SIZE=BLOCK_SIZE)
        return y
