"""Triton candidate for 5_matmul: C = A @ B, tiled, fp32 accumulation, exact fp32 products.

Each program owns one BLOCK_M x BLOCK_N tile of C and walks K in BLOCK_K steps, as in the
Triton matrix-multiplication tutorial (without its grouped ordering, which only pays off for
large matrices). tl.dot runs with input_precision="ieee" so that a GPU does not round the
inputs to TF32: the evaluator compares at fp32 atol=rtol=1e-4. What it must not do: call
torch for the product, or assume M, N, K are multiples of the block sizes.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr,  # A: (M, K) matrix
    b_ptr,  # B: (K, N) matrix
    c_ptr,  # C: (M, N) output matrix
    M,  # rows of A and C
    N,  # columns of B and C
    K,  # columns of A, rows of B (the reduced dimension)
    stride_am,  # elements between consecutive rows of A
    stride_ak,  # elements between consecutive columns of A
    stride_bk,  # elements between consecutive rows of B
    stride_bn,  # elements between consecutive columns of B
    stride_cm,  # elements between consecutive rows of C
    stride_cn,  # elements between consecutive columns of C
    BLOCK_M: tl.constexpr,  # rows of the C tile one program computes
    BLOCK_N: tl.constexpr,  # columns of the C tile one program computes
    BLOCK_K: tl.constexpr,  # slice of K loaded per step
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) rows of this tile
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,) columns of this tile
    offs_k = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # (BLOCK_M, BLOCK_N)
    for k in range(0, K, BLOCK_K):
        # Out-of-range rows, columns and the K tail load 0, which adds nothing to the dot.
        a_mask = (offs_m[:, None] < M) & (offs_k[None, :] < K - k)  # (BLOCK_M, BLOCK_K)
        b_mask = (offs_k[:, None] < K - k) & (offs_n[None, :] < N)  # (BLOCK_K, BLOCK_N)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)  # (BLOCK_M, BLOCK_K)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)  # (BLOCK_K, BLOCK_N)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn  # (BLOCK_M, BLOCK_N)
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


# 32 x 32 tiles with 32-wide K steps: tl.dot needs every dimension to be at least 16, and 32
# keeps the default 96 x 72 product at 3 x 3 programs (cheap under the interpreter) while
# still giving a GPU one tile per program with little wasted masking at these sizes.
BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], "matmul expects (M, K) @ (K, N)"
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)  # (M, N)
    if M == 0 or N == 0:
        return c
    # A 2-D grid, one program per output tile, rounded up so edge tiles are covered.
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )
    return c


class ModelNew(nn.Module):
    """Matrix product C = A @ B of an (M, K) and a (K, N) matrix, computed by matmul_kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return matmul(a, b)


if __name__ == "__main__":
    for m, k, n in ((96, 80, 72), (1, 1, 1), (33, 100, 17)):
        a, b = torch.randn(m, k), torch.randn(k, n)
        torch.testing.assert_close(ModelNew()(a, b), a @ b, atol=1e-4, rtol=1e-4)
    print("5_matmul: ok")
