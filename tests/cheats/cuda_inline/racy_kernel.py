# problem: 4_row_sum
# expect: incorrect
# check: mismatch
# gpu_only: true
# hack: every thread adds its partial sum into the row's output with a plain read-modify-write instead of an atomic or a reduction; threads of a warp overwrite each other, so the result is wrong and varies from run to run.

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void row_sum_kernel(const float* x, float* out, long long cols) {
    const float* row = x + (long long)blockIdx.x * cols;
    float partial = 0.0f;
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) partial += row[j];
    out[blockIdx.x] = out[blockIdx.x] + partial;  // a data race between the block's threads
}

torch::Tensor row_sum_cuda(torch::Tensor x) {
    auto x_c = x.contiguous();
    auto sizes = x_c.sizes().vec();
    long long cols = sizes.back();
    sizes.back() = 1;
    auto out = torch::zeros(sizes, x_c.options());
    row_sum_kernel<<<(unsigned int)out.numel(), 256>>>(x_c.data_ptr<float>(), out.data_ptr<float>(), cols);
    return out;
}
"""

module = load_inline(
    name="kz_cheat_inline_racy_kernel",
    cpp_sources="torch::Tensor row_sum_cuda(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["row_sum_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.row_sum_cuda(x)
