# problem: 1_vector_add
# style: a script-like module: unused helper functions at module level (a benchmark with triton.testing, a torch reference for local testing), a wrapper function holding the launch, `with torch.no_grad():` inside forward, BLOCK_SIZE as a module constant, and an `if __name__ == "__main__":` block that tests against torch and prints

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 1024


@triton.jit
def vector_add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    tl.store(c_ptr + offsets, a + b, mask=mask)


def triton_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.shape == b.shape
    a, b = a.contiguous(), b.contiguous()
    c = torch.empty_like(a)
    n = c.numel()
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    vector_add_kernel[grid](a, b, c, n, BLOCK_SIZE=BLOCK_SIZE)
    return c


def torch_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Only for the local test below."""
    return a + b


def benchmark(size: int = 1 << 24):
    """Local benchmark (needs a GPU); not used by the model."""
    a = torch.randn(size, device="cuda")
    b = torch.randn(size, device="cuda")
    ms = triton.testing.do_bench(lambda: triton_add(a, b))
    gbps = 3 * a.numel() * a.element_size() * 1e-9 / (ms * 1e-3)
    return ms, gbps


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return triton_add(a, b)


if __name__ == "__main__":
    torch.manual_seed(0)
    for n in (5000, 1, 4097, 98432):
        a, b = torch.randn(n), torch.randn(n)
        out = ModelNew()(a, b)
        max_diff = (out - torch_reference(a, b)).abs().max().item()
        print(f"n={n}: max diff {max_diff}")
        assert max_diff == 0.0
    if torch.cuda.is_available():
        print("bandwidth:", benchmark())
