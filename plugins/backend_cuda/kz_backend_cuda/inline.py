"""Loading a ``cuda_inline`` candidate (KernelBench's ``load_inline`` format) inside an
evaluation worker.

Candidates call ``torch.utils.cpp_extension.load_inline(name=..., cpp_sources=...,
cuda_sources=..., functions=[...])`` at import and call the returned module from
``ModelNew.forward``. Inside a worker, :func:`install` puts :func:`load_inline` in torch's
place before the candidate is imported: each call's sources are built by a child process
with the cache and timeout of ``kz_backend_cuda/inline_build.py``, and the built library is
loaded into the worker. With torch built without CUDA, a call compiles the sources (with
a CUDA toolkit) and returns an :class:`UnloadedExtension`, whose functions raise
:class:`~kz_backend_cuda.api.CudaUnavailableError`: the evaluator reports the candidate as
compiled, not run. Compiler errors become ``compile_error`` with the compiler's log and the
failing line in the candidate's file.

Every extension loaded is recorded in :data:`EXTENSIONS`, with the ``__global__`` kernels
its CUDA sources declare: ``kz_backend_cuda/traces.py`` looks for them in profiler traces.
Runs only inside worker processes.
"""

from __future__ import annotations

import functools
import importlib.util
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from kz_core import Candidate, CompileFailure, CompiledCandidate, Verdict, model_new_class, shared_build, syntax_failure

from kz_backend_cuda import inline_build
from kz_backend_cuda.compile import candidate_line
from kz_backend_cuda.traces import declared_kernels

INLINE_BACKEND = "cuda_inline"
#: Lines torch puts before the sources: ``main.cpp`` and ``cuda.cu`` (unless the call
#: passes ``no_implicit_headers=True``).
_IMPLICIT_LINES = {"main.cpp": 1, "cuda.cu": 3}


@attrs.frozen
class InlineExtension:
    """One extension a candidate loaded.

    :ivar name: the ``name`` it was built under.
    :ivar kernels: the ``__global__`` kernels its CUDA sources declare.
    :ivar status: ``built`` (loaded here) or ``checked`` (compiled, not linked).
    :ivar seconds: the build's time.
    :ivar cached: whether the build came from the cache.
    :ivar note: why a ``checked`` extension was not linked.
    :ivar path: how it was built (``light``, ``prelude`` or ``plain``: ``BuildRecord.path``).
    :ivar key: its key in the shared folder of kz's trusted builds, when it was loaded
        from there (``kz_core/evaluate/builds.py``): where the executor finds its kernels.
    """

    name: str
    kernels: tuple[str, ...]
    status: str
    seconds: float
    cached: bool
    note: str = ""
    path: str = ""
    key: str = ""


#: Every extension loaded in this process, newest last.
EXTENSIONS: list[InlineExtension] = []
#: For each loaded candidate module, the index in :data:`EXTENSIONS` of its first extension
#: (extensions it builds later, in ``__init__`` or ``forward``, follow it).
FIRST_EXTENSION: dict[str, int] = {}
#: The device builds target, and the end of the current candidate's build time.
_state: dict[str, Any] = {"device": "cpu", "deadline": None}


class UnloadedExtension(types.ModuleType):
    """Stands in for an extension that compiled but cannot be loaded here (torch has no
    CUDA): any function of it raises :class:`~kz_backend_cuda.api.CudaUnavailableError`."""

    def __init__(self, name: str, reason: str):
        super().__init__(name)
        self.kz_reason = reason

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)

        def unavailable(*args: Any, **kwargs: Any) -> Any:
            from kz_backend_cuda.api import CudaUnavailableError

            raise CudaUnavailableError(f"{self.__name__}.{attribute}: the extension compiled but was {self.kz_reason}")

        return unavailable


def _plain(value: Any, what: str) -> Any:
    """``value`` as JSON data (strings, numbers, lists, dicts), or a clear TypeError."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item, what) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item, what) for key, item in value.items()}
    raise TypeError(f"load_inline: {what} must be strings or lists of strings, got {type(value).__name__}")


def _sources(value: Any) -> list[str]:
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def source_location(arguments: dict[str, Any], source_file: str, line: int | None) -> tuple[str, int | None]:
    """The source string (one of the call's ``cpp_sources`` or ``cuda_sources``) and its line
    for a line of the file torch wrote (``main.cpp`` or ``cuda.cu``)."""
    if line is None or source_file not in _IMPLICIT_LINES:
        return "", None
    sources = _sources(arguments.get("cpp_sources" if source_file == "main.cpp" else "cuda_sources"))
    offset = line - (0 if arguments.get("no_implicit_headers") else _IMPLICIT_LINES[source_file])
    for source in sources:
        lines = source.count("\n") + 1
        if 1 <= offset <= lines:
            return source, offset
        offset -= lines
    return "", None


class InlineCompileError(Exception):
    """A ``load_inline`` call of the candidate failed to build (raised inside its import).

    :ivar failure: the :class:`~kz_core.backend.CompileFailure` to report, its line still
        relative to ``source`` (the candidate's source string that failed).
    :ivar source: that source string, for mapping the line into the candidate's file.
    """

    def __init__(self, failure: CompileFailure, source: str = ""):
        super().__init__(f"{failure.message}\n{failure.log}" if failure.log else failure.message)
        self.failure = failure
        self.source = source


def load_inline(
    name: str,
    cpp_sources: str | Sequence[str],
    cuda_sources: str | Sequence[str] | None = None,
    functions: str | Sequence[str] | dict[str, str] | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    is_python_module: bool = True,
    with_pytorch_error_handling: bool = True,
    keep_intermediates: bool = True,
    use_pch: bool = False,
    **other: Any,
) -> Any:
    """kz's ``torch.utils.cpp_extension.load_inline`` inside workers: the same arguments and
    result, built in a child process in the kz cache (``build_directory``, ``verbose``,
    ``keep_intermediates`` and ``use_pch`` are kz's to decide and are ignored).

    :raises InlineCompileError: when the sources do not build.
    """
    given = {
        "name": name,
        "cpp_sources": cpp_sources,
        "cuda_sources": cuda_sources,
        "functions": functions,
        "extra_cflags": extra_cflags,
        "extra_cuda_cflags": extra_cuda_cflags,
        "extra_ldflags": extra_ldflags,
        "extra_include_paths": extra_include_paths,
        "with_cuda": with_cuda,
        "is_python_module": is_python_module,
        "with_pytorch_error_handling": with_pytorch_error_handling,
        **{key: value for key, value in other.items() if key not in inline_build.IGNORED_ARGUMENTS},
    }
    arguments = {key: _plain(value, key) for key, value in given.items()}
    tools = inline_build.toolchain(_state["device"])
    deadline = _state["deadline"]
    timeout = inline_build.build_timeout_s() if deadline is None else deadline - time.monotonic()
    try:
        record = inline_build.build(arguments, tools, timeout)
    except inline_build.InlineBuildError as exc:
        # A machine that cannot build is no compile error of the candidate: not run.
        verdict = Verdict.RUNTIME_ERROR if exc.unavailable else Verdict.COMPILE_ERROR
        raise InlineCompileError(CompileFailure(message=exc.message, log=exc.log, verdict=verdict)) from None
    if record.status == "failed":
        source, line = source_location(arguments, record.source_file, record.line)
        raise InlineCompileError(CompileFailure(message=record.message, log=record.log, verdict=Verdict.COMPILE_ERROR, line=line), source)
    kernels = tuple(kernel for source in _sources(arguments["cuda_sources"]) for kernel in declared_kernels(source))
    key = ""
    shared = shared_build(INLINE_BACKEND, arguments, inline_build.identity(tools))
    if record.status == "built" and shared is not None and Path(record.library).resolve().is_relative_to(shared.resolve()):
        key = shared.name
    if record.status == "checked":
        module: Any = UnloadedExtension(name, f"{record.message}; it runs only where torch has CUDA")
    elif is_python_module:
        spec = importlib.util.spec_from_file_location(name, record.library)
        if spec is None or spec.loader is None:
            raise InlineCompileError(CompileFailure(message=f"load_inline: cannot load the built library {record.library}"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _register_arguments(module)
    else:
        import torch

        torch.ops.load_library(record.library)
        module = record.library
    EXTENSIONS.append(InlineExtension(name, kernels, record.status, record.seconds, record.cached, record.message if record.status == "checked" else "", record.path, key))
    return module


def _register_arguments(module: Any) -> None:
    """Wrap each function of a loaded extension so that, while a forward call is recorded,
    the tensors it is given are known to the recorder (a weight passed to C++ is never seen
    by torch's dispatcher, yet its kernels read it: ``inline_record.py`` finds pointers
    into it)."""
    from kz_core import recording_active

    def register(value: Any, recorder: Any) -> None:
        import torch

        if isinstance(value, torch.Tensor):
            recorder.ref(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                register(item, recorder)

    def wrap(function: Any) -> Any:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            recorder = recording_active()
            if recorder is not None and not recorder.suspended:
                register([*args, *kwargs.values()], recorder)
            return function(*args, **kwargs)

        return call

    for attribute in dir(module):
        value = getattr(module, attribute, None)
        if not attribute.startswith("_") and callable(value) and not isinstance(value, type):
            setattr(module, attribute, wrap(value))


def _tracer(recorder: Any) -> Any:
    """The launch tracer of a recorded call (``recording.TRACERS``): the current
    candidate's extensions' declared kernels and shared builds."""
    import contextlib

    import torch

    # Only a GPU recording is traced (a process that compiled a candidate for a CPU, such
    # as a test run, may record other forwards later).
    if _state.get("traced") is None or not str(_state.get("device", "")).startswith("cuda") or not torch.cuda.is_initialized():
        return contextlib.nullcontext()
    from kz_backend_cuda.inline_record import tracing

    first = _state["traced"]
    extensions = EXTENSIONS[first:]
    kernels = [kernel for extension in extensions for kernel in extension.kernels]
    return tracing(recorder, kernels, [extension.key for extension in extensions if extension.key])


def install() -> None:
    """Put :func:`load_inline` in place of torch's for this process (idempotent)."""
    from torch.utils import cpp_extension

    cpp_extension.load_inline = load_inline


def describe(extensions: Sequence[InlineExtension], tools: inline_build.Toolchain) -> str:
    """One note on what was built: names, kernels, toolchain, time, cache."""
    if not extensions:
        return "load_inline: no extension was built while importing the candidate"
    built = [e for e in extensions if e.status == "built"]
    verb = "built and loaded" if len(built) == len(extensions) else "compiled"
    parts = ", ".join(f"{e.name} (kernels: {', '.join(e.kernels) or 'none'})" for e in extensions)
    seconds = sum(e.seconds for e in extensions)
    cached = " (cached)" if all(e.cached for e in extensions) else ""
    paths = {e.path for e in extensions}
    how = {"light": " with kz's prelude (cuda.cu without torch/extension.h)", "prelude": " with kz's prelude"}.get(paths.pop() if len(paths) == 1 else "", "")
    note = f"load_inline: {verb} {parts} with nvcc {tools.nvcc or '?'} for TORCH_CUDA_ARCH_LIST={tools.arch_list}{how} in {seconds:.1f} s{cached}"
    unlinked = next((e.note for e in extensions if e.status == "checked"), "")
    return f"{note}; {unlinked}" if unlinked else note


def compile_candidate(candidate: Candidate, device: str, workdir: Path) -> CompiledCandidate | CompileFailure:
    from kz_core import load_module

    install()
    first = len(EXTENSIONS)
    _state.update(device=device, deadline=time.monotonic() + inline_build.build_timeout_s())
    name = f"kz_candidate_{candidate.content_hash[:16]}"
    try:
        module = load_module(candidate.code, name, str(workdir / "candidate.py"))
    except SyntaxError as exc:
        return syntax_failure(exc)
    except InlineCompileError as exc:
        failure = exc.failure
        line = candidate_line(candidate.code, exc.source, failure.line) if exc.source else None
        where = f" (candidate line {line})" if line else ""
        return attrs.evolve(failure, message=f"{failure.message}{where}", line=line)
    finally:
        _state["deadline"] = None
    model_class = model_new_class(vars(module))
    if isinstance(model_class, CompileFailure):
        return model_class
    FIRST_EXTENSION[name] = first
    # Its forward's launches are traced when it is recorded for the trusted executor.
    from kz_core import add_tracer

    _state["traced"] = first
    add_tracer(_tracer)
    notes = (describe(EXTENSIONS[first:], inline_build.toolchain(device)),)
    return CompiledCandidate(backend=INLINE_BACKEND, model_class=model_class, namespace=vars(module), notes=notes)



def candidate_kernels(compiled: CompiledCandidate) -> list[str]:
    """The kernels declared by every extension the candidate has loaded so far."""
    first = FIRST_EXTENSION.get(compiled.namespace.get("__name__", ""), len(EXTENSIONS))
    return [kernel for extension in EXTENSIONS[first:] for kernel in extension.kernels]
