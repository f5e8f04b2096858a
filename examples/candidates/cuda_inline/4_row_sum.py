"""Sum over the last dimension (keeping it), KernelBench's load_inline format: one block per
row, each thread sums a strided slice, then a tree reduction in shared memory."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

constexpr int THREADS = 256;  // a power of two for the tree reduction

__global__ void row_sum_kernel(
    const float* __restrict__ x,    // input, rows x cols, row-major and contiguous
    float* __restrict__ out,        // output, rows floats
    long long cols)                 // length of each row
{
    __shared__ float scratch[THREADS];          // one partial sum per thread
    const float* row = x + (long long)blockIdx.x * cols;
    float partial = 0.0f;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) partial += row[j];
    scratch[threadIdx.x] = partial;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) scratch[threadIdx.x] += scratch[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = scratch[0];
}

torch::Tensor row_sum_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "row_sum_cuda: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "row_sum_cuda: x must be float32");
    TORCH_CHECK(x.dim() >= 1, "row_sum_cuda: x needs a last dimension");
    auto x_c = x.contiguous();
    auto sizes = x_c.sizes().vec();
    long long cols = sizes.back();
    sizes.back() = 1;
    auto out = torch::empty(sizes, x_c.options());  // (..., 1)
    long long rows = out.numel();
    if (rows == 0) return out;
    if (cols == 0) return out.zero_();
    // One block per row: rows are independent, and a block's threads share its reduction.
    row_sum_kernel<<<(unsigned int)rows, THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x_c.data_ptr<float>(), out.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor row_sum_cuda(torch::Tensor x);"

row_sum_module = load_inline(
    name="kz_example_row_sum",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_sum_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_sum_module.row_sum_cuda(x)
