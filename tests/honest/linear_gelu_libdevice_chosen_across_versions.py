# problem: 6_linear_gelu
# style: `libdevice` chosen the way PyTorch Inductor's Triton helpers choose it across Triton versions (an import, else inside `except ImportError` a choice by `hasattr` between `tl.extra.cuda.libdevice` and `tl.math`, bound by assignment), and the GELU's constant sqrt(2 / pi) computed with NumPy and passed to the kernel as a NumPy float

import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice
except ImportError:
    if hasattr(tl.extra, "cuda") and hasattr(tl.extra.cuda, "libdevice"):
        libdevice = tl.extra.cuda.libdevice
    else:
        libdevice = tl.math

#: sqrt(2 / pi), a NumPy float (numpy.float64, a float subclass Triton takes as a scalar).
SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)


@triton.jit
def linear_gelu_kernel(
    x_ptr,  # X: (M, K) input rows
    w_ptr,  # W: (N, K) nn.Linear weight; the kernel reads it as W^T, a (K, N) matrix
    bias_ptr,  # bias: (N,) nn.Linear bias
    y_ptr,  # Y: (M, N) output
    M,  # rows of X and Y (the batch, all leading dimensions flattened)
    N,  # out_features: columns of Y, rows of W
    K,  # in_features: columns of X and of W (the reduced dimension)
    stride_xm,  # elements between consecutive rows of X
    stride_xk,  # elements between consecutive columns of X
    stride_wn,  # elements between consecutive rows of W
    stride_wk,  # elements between consecutive columns of W
    stride_ym,  # elements between consecutive rows of Y
    stride_yn,  # elements between consecutive columns of Y
    sqrt_2_over_pi,  # the GELU's constant, a float scalar
    BLOCK_M: tl.constexpr,  # rows of the Y tile one program computes
    BLOCK_N: tl.constexpr,  # columns of the Y tile one program computes
    BLOCK_K: tl.constexpr,  # slice of K loaded per step
):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    offs_k = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk  # (BLOCK_M, BLOCK_K)
    # W^T[k, n] = W[n, k]: swapping the strides reads the transpose without copying it.
    wt_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn  # (BLOCK_K, BLOCK_N)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # (BLOCK_M, BLOCK_N)
    for k in range(0, K, BLOCK_K):
        x_mask = (offs_m[:, None] < M) & (offs_k[None, :] < K - k)  # (BLOCK_M, BLOCK_K)
        w_mask = (offs_k[:, None] < K - k) & (offs_n[None, :] < N)  # (BLOCK_K, BLOCK_N)
        x = tl.load(x_ptrs, mask=x_mask, other=0.0)  # (BLOCK_M, BLOCK_K)
        wt = tl.load(wt_ptrs, mask=w_mask, other=0.0)  # (BLOCK_K, BLOCK_N)
        # "ieee": exact fp32 products, no TF32 rounding on a GPU (the tolerance is 1e-4).
        acc = tl.dot(x, wt, acc, input_precision="ieee")
        x_ptrs += BLOCK_K * stride_xk
        wt_ptrs += BLOCK_K * stride_wk

    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)  # (BLOCK_N,)
    h = acc + bias[None, :]  # (BLOCK_M, BLOCK_N): the linear layer's output

    # GELU, tanh approximation: 0.5 * h * (1 + tanh(sqrt(2 / pi) * (h + 0.044715 * h^3))).
    # CUDA's math library through Triton (compiled on a GPU; under the CPU interpreter kz supplies it).
    z = sqrt_2_over_pi * (h + 0.044715 * h * h * h)
    tanh_z = libdevice.tanh(z)
    y = 0.5 * h * (1.0 + tanh_z)

    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn  # (BLOCK_M, BLOCK_N)
    y_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=y_mask)


# 32 x 32 output tiles, 32-wide K steps: tl.dot needs every dimension >= 16, and at the default
# 24 x 48 output with K = 64 this is 1 x 2 programs of two K steps each, cheap under the
# interpreter; a GPU would want larger tiles only for much larger layers.
BLOCK_M = 32
BLOCK_N = 32
BLOCK_K = 32


def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    K = x.shape[-1]
    N = weight.shape[0]
    assert weight.shape[1] == K, "weight must be (out_features, in_features)"
    x2 = x.reshape(-1, K)  # (M, K): leading dimensions flattened; strides go to the kernel
    M = x2.shape[0]
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)  # (M, N)
    if M > 0 and N > 0:
        # A 2-D grid, one program per output tile, rounded up so edge tiles are covered.
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        linear_gelu_kernel[grid](
            x2, weight, bias, y, M, N, K,
            x2.stride(0), x2.stride(1), weight.stride(0), weight.stride(1), y.stride(0), y.stride(1), SQRT_2_OVER_PI,
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        )
    return y.view(x.shape[:-1] + (N,))  # (..., N)


class ModelNew(nn.Module):
    """A linear layer followed by GELU (tanh approximation), fused in linear_gelu_kernel."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same creation order as the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_gelu(x, self.linear.weight, self.linear.bias)


if __name__ == "__main__":
    for shape, in_features, out_features in (((24, 64), 64, 48), ((2, 5, 33), 33, 70), ((1, 1), 1, 1)):
        model = ModelNew(in_features, out_features)
        x = torch.randn(shape)
        with torch.no_grad():
            expected = torch.nn.functional.gelu(model.linear(x), approximate="tanh")
            torch.testing.assert_close(model(x), expected, atol=1e-4, rtol=1e-4)
    print("6_linear_gelu: ok")
