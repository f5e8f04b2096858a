# problem: 1_vector_add
# expect: rejected
# check: no_kernel_launch
# gpu_only: true
# hack: compiles a real CUDA kernel through the kz API but never launches it; torch computes the sum, so a harness that only checks outputs sees a correct "kernel".

import torch
import torch.nn as nn

from kz_backend_cuda import load_cuda

KERNELS = load_cuda(r"""
extern "C" __global__ void add_kernel(const float* a, const float* b, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b
