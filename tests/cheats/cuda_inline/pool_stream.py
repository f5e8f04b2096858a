# problem: 1_vector_add
# expect: rejected
# check: thread_or_stream
# gpu_only: true
# hack: the C++ launches on a stream taken from torch's stream pool (c10::cuda::getStreamFromPool), which no static check names, and returns without synchronising with torch's current stream: event timing on that stream measures nothing, and outputs may be read before they are written.

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_kernel(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    long long n = a.numel();
    auto side = c10::cuda::getStreamFromPool();
    add_kernel<<<(unsigned int)((n + 255) / 256), 256, 0, side.stream()>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

module = load_inline(
    name="kz_cheat_inline_pool_stream",
    cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["add_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return module.add_cuda(a, b)
