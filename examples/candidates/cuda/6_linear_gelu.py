"""A linear layer followed by tanh-GELU, fused: y = gelu(x @ W^T + bias) in one kernel.

ModelNew holds an ``nn.Linear`` like the reference, so the evaluator's shared seed gives
both the same weights; the kernel reads W (out_features, in_features) row-major.
"""

import torch
import torch.nn as nn

from kz_backend_cuda import load_cuda

TILE = 16  # 16 x 16 threads per block, one output element each

KERNELS = load_cuda(r"""
#define TILE 16
extern "C" __global__ void linear_gelu_kernel(
    const float* __restrict__ x,     // (batch, in_features), row-major
    const float* __restrict__ w,     // (out_features, in_features), row-major
    const float* __restrict__ bias,  // (out_features)
    float* __restrict__ y,           // (batch, out_features), row-major
    int batch, int in_features, int out_features)
{
    __shared__ float x_tile[TILE][TILE];
    __shared__ float w_tile[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;   // batch index
    int col = blockIdx.x * TILE + threadIdx.x;   // output feature
    float acc = 0.0f;
    for (int k0 = 0; k0 < in_features; k0 += TILE) {
        x_tile[threadIdx.y][threadIdx.x] = (row < batch && k0 + threadIdx.x < in_features) ? x[(long long)row * in_features + k0 + threadIdx.x] : 0.0f;
        // w_tile[k][j] = W[col0 + j][k0 + k]: the transpose, read along W's rows.
        int w_row = blockIdx.x * TILE + threadIdx.y;
        w_tile[threadIdx.x][threadIdx.y] = (w_row < out_features && k0 + threadIdx.x < in_features) ? w[(long long)w_row * in_features + k0 + threadIdx.x] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc = fmaf(x_tile[threadIdx.y][k], w_tile[k][threadIdx.x], acc);
        __syncthreads();
    }
    if (row < batch && col < out_features) {
        float v = acc + bias[col];
        const float c = 0.7978845608028654f;  // sqrt(2 / pi)
        y[(long long)row * out_features + col] = 0.5f * v * (1.0f + tanhf(c * (v + 0.044715f * v * v * v)));
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch = x.shape[0]
        out_features, in_features = self.linear.weight.shape
        y = torch.empty(batch, out_features, device=x.device, dtype=x.dtype)  # (batch, out_features)
        grid = ((out_features + TILE - 1) // TILE, (batch + TILE - 1) // TILE)
        KERNELS.linear_gelu_kernel[grid, (TILE, TILE)](
            x, self.linear.weight.contiguous(), self.linear.bias.contiguous(), y, batch, in_features, out_features
        )
        return y
