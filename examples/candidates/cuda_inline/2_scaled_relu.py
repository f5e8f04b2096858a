"""ReLU followed by a constant scale, fused into one CUDA kernel (KernelBench's load_inline
format; compare ``examples/candidates/cuda/2_scaled_relu.py``, the same kernel via NVRTC)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

__global__ void scaled_relu_kernel(
    const float* __restrict__ x,    // input, n contiguous floats
    float* __restrict__ out,        // output, n contiguous floats
    float scale,                    // multiplier applied after the ReLU
    long long n)                    // number of elements
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = (v > 0.0f ? v : 0.0f) * scale;
    }
}

torch::Tensor scaled_relu_cuda(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda(), "scaled_relu_cuda: x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "scaled_relu_cuda: x must be float32");
    auto x_c = x.contiguous();
    auto out = torch::empty_like(x_c);
    long long n = x_c.numel();
    if (n == 0) return out;
    // A streaming elementwise kernel: 256 threads (8 warps) per block keep the memory system busy.
    const int threads = 256;
    const long long blocks = (n + threads - 1) / threads;
    scaled_relu_kernel<<<(unsigned int)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x_c.data_ptr<float>(), out.data_ptr<float>(), (float)scale, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor scaled_relu_cuda(torch::Tensor x, double scale);"

scaled_relu_module = load_inline(
    name="kz_example_scaled_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scaled_relu_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scaled_relu_module.scaled_relu_cuda(x, float(self.scale))
