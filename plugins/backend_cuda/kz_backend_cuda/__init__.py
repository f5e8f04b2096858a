"""kz-backend-cuda: CUDA C++ kernels for kz, compiled with NVRTC through cuda-python
(backend ``cuda``), and KernelBench's ``load_inline`` format (backend ``cuda_inline``).

Candidates use :func:`load_cuda` (see ``kz_backend_cuda/api.py``)::

    from kz_backend_cuda import load_cuda
    kernels = load_cuda(CUDA_SOURCE)
    kernels.add[grid, block](a, b, out, n)
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # The API imports cuda-python only when a candidate asks for it.
    if name in ("load_cuda", "CudaCompileError", "CudaUnavailableError", "KernelArgumentError"):
        from kz_backend_cuda import api

        return getattr(api, name)
    raise AttributeError(name)
