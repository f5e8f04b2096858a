"""kz-backend-triton: the Triton backend for kz (``@triton.jit`` kernels launched from
``ModelNew.forward``; Triton's interpreter runs them on a machine without a GPU)."""

__version__ = "0.1.0"
