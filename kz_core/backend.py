"""The contract between the evaluator's workers and backend plugins.

``backend_compile`` returns a :class:`CompiledCandidate` or a :class:`CompileFailure`;
``backend_run`` returns a :class:`RunOutput`. These objects live inside a sandboxed worker
process (they hold the candidate's loaded module) and never travel to the caller, except
``CompileFailure``, which is plain data. Nothing here loads or runs candidate code.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import attrs

from kz_core.model import Verdict


@attrs.frozen
class CompiledCandidate:
    """A candidate loaded and compiled inside a worker.

    :ivar backend: the backend name that compiled it.
    :ivar model_class: the module's ``ModelNew`` class.
    :ivar namespace: the loaded module's globals, for backends that inspect them.
    :ivar notes: facts worth reporting (kernels found, cache hits), as short strings.
    """

    backend: str
    model_class: type
    namespace: dict[str, Any] = attrs.field(factory=dict, repr=False)
    notes: tuple[str, ...] = ()


@attrs.frozen
class CompileFailure:
    """Why a candidate could not be compiled: plain data, safe to send to the caller.

    :ivar message: one line for people, e.g. ``"NVRTC: 2 errors"``.
    :ivar log: the compiler's full log, with line numbers of the candidate's source.
    :ivar verdict: ``compile_error`` for compiler errors, ``format_error`` for a source
        without ``ModelNew``, ``runtime_error`` when this machine cannot compile it at all
        (a missing toolchain: not the candidate's fault; reported as ``not_run``).
    :ivar line: 1-based line of the first error in the candidate's source, when known.
    """

    message: str
    log: str = ""
    verdict: Verdict = Verdict.COMPILE_ERROR
    line: int | None = None


@attrs.frozen
class RunOutput:
    """One forward call's outputs and the proof that the backend's kernels ran.

    :ivar outputs: what ``model(*inputs)`` returned, unchanged.
    :ivar launches: kernel launches of the backend counted during the call.
    """

    outputs: Any
    launches: int


class KernelCompileError(Exception):
    """Raised by ``backend_run`` when a kernel fails to compile at its first launch (Triton
    compiles lazily); the worker reports it as ``compile_error`` with this message as log."""


def syntax_failure(exc: SyntaxError) -> CompileFailure:
    """The failure of a candidate that is not valid Python (the evaluator reports it under
    the check ``syntax_error``): for a backend's compile hook to return."""
    return CompileFailure(
        message=f"syntax error: {exc.msg} (line {exc.lineno})",
        log=f"{exc.filename}:{exc.lineno}: {exc.msg}\n{exc.text or ''}",
        verdict=Verdict.FORMAT_ERROR,
        line=exc.lineno,
    )


def model_new_class(namespace: Mapping[str, Any]) -> type | CompileFailure:
    """The ``ModelNew`` class of a loaded candidate module's globals, or the failure to
    return when it defines none (check ``no_model_new``)."""
    model_class = namespace.get("ModelNew")
    if not isinstance(model_class, type):
        return CompileFailure(message="the source defines no class ModelNew", verdict=Verdict.FORMAT_ERROR)
    return model_class


@attrs.define
class LaunchCounter:
    """Kernel launches a backend saw in this worker process, by kernel name: the backend's
    ``backend_run`` reports the difference across one call as :attr:`RunOutput.launches`."""

    count: int = 0
    kernels: dict[str, int] = attrs.field(factory=dict)
    lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def record(self, name: str) -> None:
        with self.lock:
            self.count += 1
            self.kernels[name] = self.kernels.get(name, 0) + 1


class TrustedKernels:
    """A candidate's kernels as the trusted executor holds them (``backend_kernels``).

    Built from the candidate's source as data, never by running its module. The executor
    calls :meth:`launch` for each kernel step of a recorded plan, on the current stream of
    the current device, with the step's arguments already resolved to the executor's own
    tensors; it counts the launches itself.
    """

    #: The backend name these kernels belong to.
    backend: str = ""
    #: Whether the kernels may read or write bytes as another dtype than their tensors'
    #: (a CUDA ``reinterpret_cast``, a Triton ``bitcast``): the replay then treats what
    #: they were given as bytes viewed so, and a torch conversion of it afterwards as
    #: computing (sign extension of a float's top byte is a sign test). True unless the
    #: backend can tell from the source.
    reinterprets_bits: bool = True

    def reinterprets(self, step: Mapping[str, Any]) -> bool:
        """Whether the kernel of a launched ``step`` may have read bytes as another dtype
        (asked after its launch; a backend that can tell from what it built says so)."""
        return self.reinterprets_bits

    def reinterpreted_last(self, step: Mapping[str, Any]) -> bool:
        """Whether the last launch of ``step``'s kernel read bytes as another dtype (a
        backend that tells launches apart says so; by default :meth:`reinterprets`): the
        replay compares the timed calls' launches with the trials'."""
        return self.reinterprets(step)

    def launch(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        """Launch one kernel step: ``step["kernel"]`` says which (what the backend's launch
        path recorded), ``step["grid"]`` the grid; ``args`` and ``options`` as recorded.

        :raises KernelCompileError: the kernel does not compile (reported as a compile error).
        :raises Exception: anything else: the launch failed (a runtime error).
        """
        raise NotImplementedError

    def precompile(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        """Compile one kernel step without launching it, ahead of the trials (optional).

        ``args`` hold tensors on the ``meta`` device with the real shapes, strides and
        dtypes: enough to specialise and compile, nothing to run. The executor calls it
        before it waits for a large problem's turn, so that compiling does not hold the GPU
        for others; failures are ignored (the kernel then compiles at its first launch).
        """

    def describe(self) -> list[str]:
        """Short notes for the result (which kernels exist, cache hits)."""
        return []
