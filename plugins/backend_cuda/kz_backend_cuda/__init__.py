"""kz-backend-cuda: CUDA C++ kernels for kz, compiled with NVRTC through cuda-python
(backend ``cuda``), and KernelBench's ``load_inline`` format (backend ``cuda_inline``)."""

__version__ = "0.1.0"
