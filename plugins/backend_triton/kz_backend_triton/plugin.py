"""The kz-backend-triton plugin's hook implementations.

Registration and static checks run in the caller and read source text only; compile and
run are answered inside the evaluator's workers. Triton itself is imported lazily, so
this module loads (for ``kz plugins``) without initialising it.
"""

from __future__ import annotations

import os

from kz_core import BackendInfo, KernelCompileError, RunOutput, hookimpl

from kz_backend_triton.checks import check_triton_source

BACKEND = "triton"


#: Triton's cache manager in candidate workers and sealed executors.
LAYERED_CACHE = "kz_backend_triton.cache:LayeredCacheManager"


@hookimpl
def register_backends(register):
    register(
        BackendInfo(
            name=BACKEND,
            language="triton",
            description="@triton.jit kernels launched from ModelNew.forward; the interpreter runs them on a CPU",
            runs_on_cpu=True,
            trusted_kernels=True,
            prompt_guide=(
                "Write the kernels in Triton: functions decorated with @triton.jit, launched from "
                "ModelNew.forward as kernel[grid](...)."
            ),
            versions=("triton",),
            cpu_environment={"TRITON_INTERPRET": "1"},  # Triton's interpreter runs kernels on a CPU
            preload=(
                "triton",
                "triton.language",
                "triton.runtime.interpreter",
                "kz_backend_triton.launches",
                "kz_backend_triton.compile",
                "kz_backend_triton.trusted",
            ),
            # Triton's kernel cache per role: executors (kz's code only) write the shared one
            # and candidates read it beside a cache of their own (kz_backend_triton/cache.py).
            shared_caches=("triton-executor",),
            packages=("triton", "kz_backend_triton"),
            passthrough=("TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH"),
            environment=(
                ("candidate", "TRITON_CACHE_DIR", "{scratch}/triton-cache"),
                ("candidate", "TRITON_CACHE_MANAGER", LAYERED_CACHE),
                ("candidate", "KZ_TRITON_READ_CACHE", "{cache}/triton-executor"),
                ("executor", "TRITON_CACHE_DIR", "{cache}/triton-executor"),
                ("sealed_executor", "TRITON_CACHE_DIR", "{scratch}/triton-cache"),
                ("sealed_executor", "TRITON_CACHE_MANAGER", LAYERED_CACHE),
                ("sealed_executor", "KZ_TRITON_READ_CACHE", "{cache}/triton-executor"),
                ("reference", "TRITON_CACHE_DIR", "{scratch}/triton-cache"),
                # Reference workers read the checks' kernels that executors compiled
                # (kz_core/evaluate/device_checks.py) and write only their own cache.
                ("reference", "TRITON_CACHE_MANAGER", LAYERED_CACHE),
                ("reference", "KZ_TRITON_READ_CACHE", "{cache}/triton-executor"),
                ("trusted", "TRITON_CACHE_DIR", "{scratch}/triton-cache"),
            ),
        )
    )


@hookimpl
def static_checks(candidate):
    if candidate.backend != BACKEND:
        return []
    return check_triton_source(candidate.code)


@hookimpl
def backend_compile(candidate, workdir):
    if candidate.backend != BACKEND:
        return None
    from kz_backend_triton.compile import compile_candidate

    return compile_candidate(candidate, workdir)


@hookimpl
def backend_kernels(candidate, workdir):
    if candidate.backend != BACKEND:
        return None
    from kz_core import CompileFailure

    from kz_backend_triton.kernels import TritonKernels
    from kz_backend_triton.trusted import KernelExtractionError, extract_kernels

    if os.environ.get("TRITON_INTERPRET") == "1":
        from kz_backend_triton import interpreted_libdevice

        interpreted_libdevice.install()  # libdevice's math, which the interpreter lacks
    try:
        return TritonKernels(extract_kernels(candidate.code, str(workdir / "candidate.py")), source=candidate.code)
    except KernelExtractionError as exc:
        return CompileFailure(message=f"its Triton kernels cannot be built apart from the module: {exc}", line=getattr(exc, "line", None))


@hookimpl
def backend_run(compiled, model, inputs):
    if compiled.backend != BACKEND:
        return None
    from triton.compiler.errors import CompilationError

    from kz_backend_triton.launches import COUNTER

    before = COUNTER.count
    try:
        outputs = model(*inputs)
    except CompilationError as exc:
        raise KernelCompileError(str(exc)) from exc
    return RunOutput(outputs=outputs, launches=COUNTER.count - before)
