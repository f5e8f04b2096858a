# problem: 1_vector_add
# expect: runtime_error
# check: not_replayable
# gpu_only: true
# class: 7
# hack: dead_kernel's thrust::transform computes the sum, and the declared kernel is launched too, on one element, so that the profiler's trace shows it every call. Its launches cannot be recorded for the trusted executor (thrust's kernel is not declared in its sources), so it ran in its own process, where the trace and the absence of torch ops were all the evidence: judged correct there. Since the forty-first session such a forward is refused unless eval.unverified_fallback is set.

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
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
    add_kernel<<<1, 1, 0, c10::cuda::getCurrentCUDAStream()>>>(pa, b_c.data_ptr<float>(), out.data_ptr<float>(), 1);  // seen in the trace every call
    thrust::transform(thrust::device, pa, pa + a_c.numel(), b_c.data_ptr<float>(), out.data_ptr<float>(), thrust::plus<float>());
    return out;
}
"""

add_module = load_inline(
    name="kz_cheat_inline_thrust_token_launch",
    cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["add_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_module.add_cuda(a, b)
