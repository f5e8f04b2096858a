"""Loading a Triton candidate inside an evaluation worker.

The source is executed as a fresh module with the launch counter installed first, so
every kernel it defines launches through the counted path. Triton compiles kernels
lazily, at their first launch: compiler errors surface in ``backend_run`` and are
reported as ``KernelCompileError``. Runs only inside worker processes.
"""

from __future__ import annotations

from pathlib import Path

from kz_core import Candidate, CompileFailure, CompiledCandidate, model_new_class, syntax_failure

from kz_backend_triton import launches


def compile_candidate(candidate: Candidate, workdir: Path) -> CompiledCandidate | CompileFailure:
    from kz_core import load_module

    launches.install()
    name = f"kz_candidate_{candidate.content_hash[:16]}"
    try:
        module = load_module(candidate.code, name, str(workdir / "candidate.py"))
    except SyntaxError as exc:
        return syntax_failure(exc)
    model_class = model_new_class(vars(module))
    if isinstance(model_class, CompileFailure):
        return model_class
    kernels = sorted(
        key
        for key, value in vars(module).items()
        if type(value).__name__ in ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics")
    )
    return CompiledCandidate(backend="triton", model_class=model_class, namespace=vars(module), notes=(f"kernels: {', '.join(kernels) or 'none'}",))
