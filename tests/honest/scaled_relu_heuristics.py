# problem: 2_scaled_relu
# style: @triton.heuristics choosing BLOCK_SIZE from the argument values and an EVEN_N flag that drops the mask when the length divides evenly, with the grid lambda reading meta['BLOCK_SIZE'] and the scale passed as a keyword argument among positional ones

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.heuristics(
    {
        "BLOCK_SIZE": lambda args: min(4096, triton.next_power_of_2(args["n_elements"])),
        "EVEN_N": lambda args: args["n_elements"] % min(4096, triton.next_power_of_2(args["n_elements"])) == 0,
    }
)
@triton.jit
def scaled_relu_kernel(x_ptr, y_ptr, n_elements, scale, BLOCK_SIZE: tl.constexpr, EVEN_N: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN_N:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n_elements, other=0.0)
    y = tl.where(x > 0, x, 0.0) * scale
    if EVEN_N:
        tl.store(y_ptr + offs, y)
    else:
        tl.store(y_ptr + offs, y, mask=offs < n_elements)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_flat = x.contiguous().view(-1)
        y = torch.empty_like(x_flat)
        n = x_flat.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
        scaled_relu_kernel[grid](x_flat, y, n, scale=self.scale)
        return y.view(x.shape)
