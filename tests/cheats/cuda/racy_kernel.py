# problem: 4_row_sum
# expect: incorrect
# check: mismatch
# gpu_only: true
# hack: every thread adds into the same output with a plain read-modify-write instead of an atomic or a reduction; the result depends on thread scheduling and is wrong or varies between runs.

import torch
import torch.nn as nn

from kz_backend_cuda import load_cuda

KERNELS = load_cuda(r"""
extern "C" __global__ void row_sum_kernel(const float* x, float* out, int cols) {
    const float* row = x + (long long)blockIdx.x * cols;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        out[blockIdx.x] = out[blockIdx.x] + row[j];  // a data race between threads
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.zeros(*x.shape[:-1], 1, device=x.device, dtype=x.dtype)
        KERNELS.row_sum_kernel[x.numel() // cols, 256](x, out, cols)
        return out
