"""Triton candidate for 1_vector_add: out = a + b with one masked elementwise kernel.

What it must not do: compute the sum with torch, or assume the default length (5000) or a
power of two; any length and either device (CPU under TRITON_INTERPRET=1, or CUDA) work.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(
    a_ptr,  # first input: n_elements contiguous values
    b_ptr,  # second input: n_elements contiguous values of a's dtype
    out_ptr,  # output: n_elements contiguous values of a's dtype
    n_elements,  # length of each vector
    BLOCK_SIZE: tl.constexpr,  # elements one program adds; a power of two, as tl.arange needs
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,)
    # The last program runs past the end whenever n_elements is not a multiple of BLOCK_SIZE.
    mask = offsets < n_elements  # (BLOCK_SIZE,)
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


# 1024 elements per program, as in the Triton vector-add tutorial: enough work per program
# to hide its start-up cost on a GPU, and few programs (5 for n=5000) under the interpreter.
BLOCK_SIZE = 1024


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.shape == b.shape and a.dtype == b.dtype, "add expects two tensors of one shape and dtype"
    a = a.contiguous()
    b = b.contiguous()
    out = torch.empty_like(a)  # same shape, dtype and device as a
    n_elements = a.numel()
    if n_elements == 0:
        return out
    # One program per BLOCK_SIZE slice, rounded up so that the tail is covered.
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    add_kernel[grid](a, b, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


class ModelNew(nn.Module):
    """Elementwise sum of two vectors, computed by add_kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add(a, b)


if __name__ == "__main__":
    # Correctness check against PyTorch, at the problem's size and at an awkward one.
    for n in (5000, 1, 98432 + 7):
        a, b = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(ModelNew()(a, b), a + b, atol=1e-4, rtol=1e-4)
    print("1_vector_add: ok")
