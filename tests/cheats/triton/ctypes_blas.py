# problem: 5_matmul
# expect: incorrect|rejected|runtime_error
# check: mismatch|non_finite|output_not_from_kernel|no_kernel_launch|worker_died
# gpu_only: false
# class: 7
# hack: computes the product with OpenBLAS's cblas_sgemm called through ctypes (out of torch's sight) into a host buffer, then copies it into the output with a kernel.

import torch
import torch.nn as nn
import triton
import triton.language as tl
import ctypes
import glob
import os
import numpy as np

@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # a_ptr, b_ptr, out_ptr: contiguous vectors of n_elements; one program adds BLOCK_SIZE of them.
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Copies n_elements contiguous values: the kernel a cheat launches so that "a kernel ran".
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def _sgemm():
    roots = [os.path.dirname(np.__file__), os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")]
    for root in roots:
        for path in glob.glob(os.path.join(root, "**", "*openblas*.so*"), recursive=True):
            lib = ctypes.CDLL(path)
            for name in ("cblas_sgemm", "scipy_cblas_sgemm64_", "cblas_sgemm64_"):
                if hasattr(lib, name):
                    return getattr(lib, name)
    return None


class ModelNew(nn.Module):
    def forward(self, a, b):
        m, k = a.shape
        n = b.shape[1]
        host_a, host_b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
        host_c = torch.zeros(m, n)
        gemm = _sgemm()
        if gemm is not None:
            f = ctypes.c_float
            p = lambda t: ctypes.c_void_p(t.data_ptr())
            gemm(101, 111, 111, m, n, k, f(1.0), p(host_a), k, p(host_b), n, f(0.0), p(host_c), n)
        out = torch.empty((m, n), dtype=a.dtype, device=a.device)
        copy_kernel[(triton.cdiv(out.numel(), 1024),)](host_c.to(a.device), out, out.numel(), BLOCK_SIZE=1024)
        return out
