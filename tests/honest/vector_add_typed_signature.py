# problem: 1_vector_add
# style: a kernel signature with Python type annotations, as Triton accepts them (`n_elements: int` specialises to i32, pointers annotated `tl.tensor`), and a typed wrapper function

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr: tl.tensor, y_ptr: tl.tensor, out_ptr: tl.tensor, n_elements: int, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements: int = out.numel()
    grid: tuple[int] = (triton.cdiv(n_elements, block_size),)
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=block_size)
    return out


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add(a.contiguous(), b.contiguous())
