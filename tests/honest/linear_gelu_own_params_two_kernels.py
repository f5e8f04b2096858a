# problem: 6_linear_gelu
# style: weight and bias held as nn.Parameter and initialised the way nn.Linear does it (kaiming_uniform_, then a uniform bias), @torch.inference_mode() on forward, a matmul + bias kernel writing an intermediate buffer followed by a separate elementwise GELU kernel, a HAS_BIAS constexpr flag, x.view(-1, K) and a reshape back

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, h_ptr, M, N, K,
                  stride_xm, stride_wn, stride_hm,
                  HAS_BIAS: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_idx = k * BLOCK_K + offs_k
        x_tile = tl.load(x_ptr + offs_m[:, None] * stride_xm + k_idx[None, :],
                         mask=(offs_m[:, None] < M) & (k_idx[None, :] < K), other=0.0)
        # W is (N, K) row-major: load a (BLOCK_K, BLOCK_N) tile of W^T
        w_tile = tl.load(w_ptr + offs_n[None, :] * stride_wn + k_idx[:, None],
                         mask=(offs_n[None, :] < N) & (k_idx[:, None] < K), other=0.0)
        acc = tl.dot(x_tile, w_tile, acc, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    tl.store(h_ptr + offs_m[:, None] * stride_hm + offs_n[None, :], acc,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def gelu_tanh_kernel(h_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    h = tl.load(h_ptr + offs, mask=mask)
    inner = 0.7978845608028654 * (h + 0.044715 * h * h * h)
    # tanh via exp of a non-positive argument: no overflow
    e = tl.exp(-2.0 * tl.abs(inner))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(inner >= 0, t, -t)
    tl.store(y_ptr + offs, 0.5 * h * (1.0 + t), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Same initialisation as nn.Linear.
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        fan_in = self.weight.shape[1]
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        nn.init.uniform_(self.bias, -bound, bound)

    @torch.inference_mode()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        K = self.in_features
        N = self.out_features
        x2 = x.contiguous().view(-1, K)
        M = x2.shape[0]
        h = torch.empty((M, N), device=x.device, dtype=torch.float32)
        BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 32
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        linear_kernel[grid](x2, self.weight, self.bias, h, M, N, K,
                            x2.stride(0), self.weight.stride(0), h.stride(0),
                            HAS_BIAS=self.bias is not None,
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
        y = torch.empty_like(h)
        n = h.numel()
        gelu_tanh_kernel[(triton.cdiv(n, 1024),)](h, y, n, BLOCK_SIZE=1024)
        return y.reshape(*x.shape[:-1], N)
