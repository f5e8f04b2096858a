# problem: 6_linear_gelu
# style: the transposed weight cached lazily on the module at the first call (self._w_t = self.linear.weight.t().contiguous()), @torch.no_grad() on forward, module-level tl.constexpr GELU constants, a fused matmul + bias + tanh-GELU kernel reading W^T as a contiguous (K, N) matrix

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(math.sqrt(2.0 / math.pi))
GELU_COEF = tl.constexpr(0.044715)


@triton.jit
def tanh_approx(x):
    # tanh(x) = 1 - 2 / (exp(2x) + 1): saturates to -1 and 1 without NaN
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


@triton.jit
def fused_linear_gelu_kernel(
    x_ptr, wt_ptr, b_ptr, y_ptr,
    M, N, K,
    stride_xm, stride_xk, stride_wk, stride_wn, stride_ym, stride_yn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        x = tl.load(x_ptr + rm[:, None] * stride_xm + kk[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(wt_ptr + kk[:, None] * stride_wk + rn[None, :] * stride_wn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    h = acc + bias[None, :]
    y = 0.5 * h * (1.0 + tanh_approx((h + h * h * h * GELU_COEF) * SQRT_2_OVER_PI))
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn, y,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._w_t = None  # (in_features, out_features), made at the first call

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._w_t is None or self._w_t.device != x.device:
            self._w_t = self.linear.weight.t().contiguous()
        x2 = x.reshape(-1, x.shape[-1])
        M, K = x2.shape
        N = self._w_t.shape[1]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        fused_linear_gelu_kernel[grid](
            x2, self._w_t, self.linear.bias, y,
            M, N, K,
            x2.stride(0), x2.stride(1), self._w_t.stride(0), self._w_t.stride(1), y.stride(0), y.stride(1),
            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
        )
        return y.view(*x.shape[:-1], N)
