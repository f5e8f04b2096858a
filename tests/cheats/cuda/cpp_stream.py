# problem: 1_vector_add
# expect: rejected
# check: thread_or_stream
# gpu_only: false
# backend: cuda_inline
# hack: the load_inline C++ creates a CUDA stream of its own and launches there without synchronising with torch's stream, so event timing on torch's stream measures nothing and outputs may be read before they are written.

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    long long n = a.numel();
    cudaStream_t side;
    cudaStreamCreate(&side);
    add_kernel<<<(n + 255) / 256, 256, 0, side>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

add_module = load_inline(name="kz_cheat_cpp_stream", cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);", cuda_sources=cuda_source, functions=["add_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_module.add_cuda(a, b)
