"""Loading a CUDA candidate (backend ``cuda``) inside an evaluation worker.

The candidate's module runs with the kz CUDA API available; its ``load_cuda`` calls
compile with NVRTC at import. A compiler error becomes a ``compile_error`` carrying
NVRTC's log, with the failing line mapped back to the candidate's own source. Runs only
inside worker processes.
"""

from __future__ import annotations

from pathlib import Path

from kz_core import Candidate, CompileFailure, CompiledCandidate, Verdict, model_new_class, syntax_failure

from kz_backend_cuda import api
from kz_backend_cuda.nvrtc import CudaCompileError
from kz_backend_cuda.signature import SignatureError


def candidate_line(code: str, cuda_source: str, cuda_line: int | None) -> int | None:
    """The candidate's line for a line of a CUDA source string it contains, when found."""
    if cuda_line is None:
        return None
    start = code.find(cuda_source)
    if start < 0:
        start = code.find(cuda_source.strip())
        if start < 0:
            return None
        cuda_source = cuda_source.strip()
    return code[:start].count("\n") + cuda_line


def compile_candidate(candidate: Candidate, workdir: Path) -> CompiledCandidate | CompileFailure:
    from kz_core import load_module

    loaded_before = len(api.LOADED)
    name = f"kz_candidate_{candidate.content_hash[:16]}"
    try:
        module = load_module(candidate.code, name, str(workdir / "candidate.py"))
    except SyntaxError as exc:
        return syntax_failure(exc)
    except CudaCompileError as exc:
        line = candidate_line(candidate.code, exc.source, exc.line) if exc.source else None
        where = f" (candidate line {line})" if line else ""
        return CompileFailure(message=f"{exc}{where}", log=exc.log, verdict=Verdict.COMPILE_ERROR, line=line)
    except SignatureError as exc:
        return CompileFailure(message=str(exc), verdict=Verdict.COMPILE_ERROR)
    model_class = model_new_class(vars(module))
    if isinstance(model_class, CompileFailure):
        return model_class
    modules = api.LOADED[loaded_before:]
    kernels = [name for m in modules for name in m.kernels]
    seconds = sum(m.compiled.seconds for m in modules)
    cached = all(m.compiled.cached for m in modules) if modules else False
    notes = (
        f"NVRTC: {len(kernels)} kernel(s) ({', '.join(kernels) or 'none'}) for {modules[0].compiled.arch if modules else '?'} "
        f"in {seconds:.3f} s{' (cached)' if cached else ''}",
    )
    return CompiledCandidate(backend="cuda", model_class=model_class, namespace=vars(module), notes=notes)

