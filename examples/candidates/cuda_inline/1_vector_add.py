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
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_kernel(
    const float* __restrict__ a,    // first input, n contiguous floats
    const float* __restrict__ b,    // second input, n contiguous floats
    float* __restrict__ out,        // output, n contiguous floats
    long long n)                    // number of elements
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "add_cuda: inputs must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "add_cuda: inputs must be float32");
    TORCH_CHECK(a.sizes() == b.sizes(), "add_cuda: inputs must have the same shape");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    long long n = a_c.numel();
    if (n == 0) return out;
    // A streaming elementwise kernel: 256 threads (8 warps) per block, one element each.
    const int threads = 256;
    const long long blocks = (n + threads - 1) / threads;
    // Launch on torch's current stream, so that the kernel is ordered with torch's work.
    add_kernel<<<(unsigned int)blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        a_c.data_ptr<float>(), b_c.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);"

add_module = load_inline(
    name="kz_example_vector_add",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add_module.add_cuda(a, b)
