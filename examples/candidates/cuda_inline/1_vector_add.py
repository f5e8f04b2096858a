"""Vector addition in KernelBench's format: CUDA C++ built with torch's load_inline.

This is the format published kernel-writing models emit. It builds a PyTorch C++
extension (slow: tens of seconds per source, so kz caches and builds ahead of GPU time);
the kz CUDA API (backend ``cuda``) compiles the same kernel with NVRTC in milliseconds.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    long long n = a_c.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    add_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        a_c.data_ptr<float>(), b_c.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"

add_module = load_inline(
    name="kz_example_vector_add",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_cuda"],
    extra_include_paths=[],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add_module.add_cuda(a, b)
