"""The kz CUDA API on a GPU (``pytest -m gpu``): launches, results, counting, streams."""

from __future__ import annotations

import pytest
import torch

from kz_backend_cuda import api

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]

SOURCE = r"""
extern "C" __global__ void axpy(const float* x, float* y, float alpha, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
}
extern "C" __global__ void block_sum(const float* x, float* out, int n) {
    extern __shared__ float scratch[];
    float v = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) v += x[j];
    scratch[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = scratch[0];
}
"""


def test_launch_computes_and_is_counted():
    module = api.load_cuda(SOURCE)
    x = torch.randn(10_001, device="cuda")
    y = torch.randn(10_001, device="cuda")
    expected = 2.5 * x + y
    before = api.LAUNCHES.count
    module.axpy[(x.numel() + 255) // 256, 256](x, y, 2.5, x.numel())
    torch.cuda.synchronize()
    assert api.LAUNCHES.count == before + 1 and api.LAUNCHES.kernels["axpy"] >= 1
    torch.testing.assert_close(y, expected)


def test_dynamic_shared_memory():
    module = api.load_cuda(SOURCE)
    x = torch.randn(5000, device="cuda")
    out = torch.empty(1, device="cuda")
    module.block_sum[1, 512, 512 * 4](x, out, x.numel())
    torch.testing.assert_close(out[0], x.sum(), rtol=1e-4, atol=1e-3)


def test_launches_go_to_torchs_current_stream():
    module = api.load_cuda(SOURCE)
    stream = torch.cuda.Stream()
    x = torch.ones(1 << 20, device="cuda")
    y = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        module.axpy[(x.numel() + 255) // 256, 256](x, y, 1.0, x.numel())
    stream.synchronize()
    assert bool((y == 1).all())


def test_dtype_mismatch_on_the_gpu_is_a_clear_error():
    module = api.load_cuda(SOURCE)
    x = torch.ones(4, device="cuda", dtype=torch.float64)
    with pytest.raises(api.KernelArgumentError, match="needs a tensor of dtype float32, got float64"):
        module.axpy[1, 4](x, torch.ones(4, device="cuda"), 1.0, 4)
