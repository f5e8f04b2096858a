"""The kz-backend-cuda plugin's hook implementations.

Registration and static checks read source text in the caller. Compile and run of the
``cuda`` backend (NVRTC through the kz CUDA API) are answered inside the evaluator's
workers; cuda-python is imported lazily, so ``kz plugins`` never loads it. The
``cuda_inline`` backend (KernelBench's load_inline format) is registered and checked, but
not yet compiled or run: its workers answer no compile hook, and the evaluator says so.
"""

from __future__ import annotations

from kz_core import hookimpl
from kz_core.backend import RunOutput
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


@hookimpl
def backend_compile(candidate, workdir):
    if candidate.backend != NVRTC_BACKEND:
        return None
    from kz_backend_cuda.compile import compile_candidate

    return compile_candidate(candidate, workdir)


@hookimpl
def backend_run(compiled, model, inputs):
    if compiled.backend != NVRTC_BACKEND:
        return None
    from kz_backend_cuda.api import LAUNCHES

    before = LAUNCHES.count
    outputs = model(*inputs)
    return RunOutput(outputs=outputs, launches=LAUNCHES.count - before)
