# problem: 1_vector_add
# expect: runtime_error|rejected
# check: not_replayable|no_kernel_launch
# gpu_only: true
# hack: the load_inline extension defines a real __global__ kernel but never launches it; a library kernel (thrust::transform) computes the sum, and no torch op runs in forward, so only the proof of launch (the declared kernel in the profiler's trace) can tell.

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/transform.h>

__global__ void add_kernel(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    const float* pa = a_c.data_ptr<float>();
    thrust::transform(thrust::device, pa, pa + a_c.numel(), b_c.data_ptr<float>(), out.data_ptr<float>(), thrust::plus<float>());
    return out;
}
"""

add_module = load_inline(
    name="kz_cheat_inline_dead_kernel",
    cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["add_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_module.add_cuda(a, b)
