# problem: 2_scaled_relu
# expect: runtime_error|rejected
# check: not_replayable|no_kernel_launch
# gpu_only: true
# hack: the C++ function launches its kernel on the first call only and keeps that output in a static tensor, which it returns on every later call: the cache lives in C++, out of reach of any Python-level inspection, so a harness that checks one call and times the rest sees a correct and nearly free kernel.

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void scaled_relu_kernel(const float* x, float* out, float scale, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; out[i] = (v > 0.0f ? v : 0.0f) * scale; }
}

torch::Tensor scaled_relu_cuda(torch::Tensor x, double scale) {
    static torch::Tensor cached;
    if (!cached.defined()) {
        auto x_c = x.contiguous();
        cached = torch::empty_like(x_c);
        long long n = x_c.numel();
        scaled_relu_kernel<<<(unsigned int)((n + 255) / 256), 256>>>(x_c.data_ptr<float>(), cached.data_ptr<float>(), (float)scale, n);
    }
    return cached;
}
"""

module = load_inline(
    name="kz_cheat_inline_output_cache",
    cpp_sources="torch::Tensor scaled_relu_cuda(torch::Tensor x, double scale);",
    cuda_sources=cuda_source,
    functions=["scaled_relu_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return module.scaled_relu_cuda(x, float(self.scale))
