"""The kz-backend-cuda plugin's hook implementations.

Registration and static checks read source text in the caller. Compile and run are
answered inside the evaluator's workers, for both backends:

- ``cuda``: NVRTC through the kz CUDA API (``compile.py``); launches are counted by the
  API itself. cuda-python is imported lazily, so ``kz plugins`` never loads it.
- ``cuda_inline``: KernelBench's ``load_inline`` format (``inline.py``). Each
  ``load_inline`` call is built by a child process of the worker, cached by a hash of its
  sources and flags, under a build timeout (``inline_build.py``); launches are the
  declared ``__global__`` kernels found in the profiler's CUDA trace of each call
  (``traces.py``). With torch built without CUDA the sources are compiled, not linked,
  and the evaluator reports the candidate as compiled but not run.
"""

from __future__ import annotations

from kz_core import BackendInfo, RunOutput, hookimpl

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
            trusted_kernels=True,
            prompt_guide=(
                'Write the kernels in CUDA C++ as extern "C" __global__ functions. Compile them with '
                "`from kz_backend_cuda import load_cuda; kernels = load_cuda(SOURCE)` and launch them from "
                "ModelNew.forward as kernels.name[grid, block](*args) or kernels.name[grid, block, shared_bytes](*args)."
            ),
            versions=("cuda-python",),
            preload=("kz_backend_cuda.api", "cuda.bindings.driver"),
            shared_caches=("nvrtc",),  # cubins executors compile (kz_backend_cuda/nvrtc.py)
            packages=("cuda", "kz_backend_cuda"),
        )
    )
    register(
        BackendInfo(
            name=INLINE_BACKEND,
            language="cuda",
            description="KernelBench format: CUDA C++ built with torch.utils.cpp_extension.load_inline",
            runs_on_cpu=False,
            # Launches from the C++ host code are recorded through CUPTI (inline_record.py)
            # and replayed from the GPU code of kz's own build (inline_trusted.py); a
            # forward that a plan cannot describe runs in its own process, unverified.
            trusted_kernels=True,
            unverified_fallback=True,
            prompt_guide=(
                "Write the kernels in CUDA C++ and build them with torch.utils.cpp_extension.load_inline; "
                "call the compiled functions from ModelNew.forward."
            ),
            # Extensions are built once by kz's trusted builder and shared (kz_core/evaluate/builds.py).
            packages=("cuda", "kz_backend_cuda"),
            builder="kz_backend_cuda.inline_build:build_shared",
            build_identity="kz_backend_cuda.inline_build:build_identity",
        )
    )


@hookimpl
def static_checks(candidate):
    if candidate.backend not in BACKENDS:
        return []
    return check_cuda_source(candidate.code, candidate.backend)


@hookimpl
def backend_compile(candidate, device, workdir):
    if candidate.backend == NVRTC_BACKEND:
        from kz_backend_cuda.compile import compile_candidate

        return compile_candidate(candidate, workdir)
    if candidate.backend == INLINE_BACKEND:
        from kz_backend_cuda import inline

        return inline.compile_candidate(candidate, device, workdir)
    return None


@hookimpl
def backend_kernels(candidate):
    if candidate.backend == INLINE_BACKEND:
        from kz_backend_cuda.inline_trusted import InlineKernels

        return InlineKernels(candidate.code)
    if candidate.backend != NVRTC_BACKEND:
        return None
    from kz_backend_cuda.trusted import NvrtcKernels

    return NvrtcKernels()


@hookimpl
def backend_run(compiled, model, inputs):
    if compiled.backend == NVRTC_BACKEND:
        from kz_backend_cuda.api import LAUNCHES

        before = LAUNCHES.count
        outputs = model(*inputs)
        return RunOutput(outputs=outputs, launches=LAUNCHES.count - before)
    if compiled.backend == INLINE_BACKEND:
        from kz_core import records_plans

        if records_plans():
            # Recorded for the trusted executor, which counts launches itself; CUPTI is
            # the recording's tracer's (inline_record.py), not the profiler's.
            return RunOutput(outputs=model(*inputs), launches=0)
        from kz_backend_cuda.inline import candidate_kernels
        from kz_backend_cuda.traces import count_declared_launches, traced_call

        outputs, trace_kernels = traced_call(model, inputs)
        launches = count_declared_launches(trace_kernels, candidate_kernels(compiled))
        return RunOutput(outputs=outputs, launches=sum(launches.values()))
    return None
