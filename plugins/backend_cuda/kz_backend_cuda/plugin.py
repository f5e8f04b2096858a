"""The kz-backend-cuda plugin's hook implementations: registration and static checks.

Compilation (NVRTC) and runs inside the evaluator's workers arrive with the CUDA backend
work; this module must stay importable without cuda-python (it only reads source text).
"""

from __future__ import annotations

from kz_core import hookimpl
from kz_core.model import BackendInfo

from kz_backend_cuda.checks import INLINE_BACKEND, check_cuda_source

NVRTC_BACKEND = "cuda"
BACKENDS = (NVRTC_BACKEND, INLINE_BACKEND)


@hookimpl
def register_backends(register):
    register(
        BackendInfo(
            name=NVRTC_BACKEND,
            language="cuda",
            description="CUDA C++ compiled in-process with NVRTC (cuda-python) and launched through the kz CUDA API",
            runs_on_cpu=False,
        )
    )
    register(
        BackendInfo(
            name=INLINE_BACKEND,
            language="cuda",
            description="KernelBench format: CUDA C++ built with torch.utils.cpp_extension.load_inline",
            runs_on_cpu=False,
        )
    )


@hookimpl
def static_checks(candidate):
    if candidate.backend not in BACKENDS:
        return []
    return check_cuda_source(candidate.code, candidate.backend)
