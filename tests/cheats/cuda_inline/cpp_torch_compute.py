# problem: 1_vector_add
# expect: rejected
# check: torch_compute_in_forward
# gpu_only: true
# hack: the C++ host code computes the sum with torch (at::add) and launches a declared kernel that writes nothing, so a kernel of the candidate's own did launch on the output and the profiler's trace shows it; recorded through CUPTI and replayed by the executor, the plan holds the aten add it ran.

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void touch_kernel(float* out, long long n) {
    if (n < 0 && threadIdx.x == 0) out[0] = 0.0f;  // never true: writes nothing
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = at::add(a, b);
    touch_kernel<<<1, 32, 0, c10::cuda::getCurrentCUDAStream()>>>(out.data_ptr<float>(), out.numel());
    return out;
}
"""

module = load_inline(
    name="kz_cheat_inline_cpp_torch_compute",
    cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["add_cuda"],
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return module.add_cuda(a, b)
