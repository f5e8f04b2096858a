"""Sum over the last dimension (keeping it): one block per row, a shared-memory reduction."""

import torch
import torch.nn as nn

from kz_backend_cuda import load_cuda

KERNELS = load_cuda(r"""
extern "C" __global__ void row_sum_kernel(
    const float* __restrict__ x,    // input, rows x cols, row-major and contiguous
    float* __restrict__ out,        // output, rows floats
    int cols)                       // length of each row
{
    extern __shared__ float scratch[];          // blockDim.x partial sums
    const float* row = x + (long long)blockIdx.x * cols;
    float partial = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) partial += row[j];
    scratch[threadIdx.x] = partial;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) scratch[threadIdx.x] += scratch[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = scratch[0];
}
""")

THREADS = 256  # a power of two for the tree reduction; each thread first sums a strided slice


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty(*x.shape[:-1], 1, device=x.device, dtype=x.dtype)  # (..., 1)
        rows = x.numel() // cols
        KERNELS.row_sum_kernel[rows, THREADS, THREADS * 4](x, out, cols)
        return out
