"""Counting Triton kernel launches through Triton's own launch path.

``kernel[grid](...)`` ends in ``JITFunction.run`` (compiled kernels on a GPU) or
``InterpretedFunction.run`` (the interpreter on a CPU); autotuned and heuristic kernels
reach the same methods. :func:`install` wraps both once per process so that every launch
that is not a warm-up increments :data:`COUNTER`, and, while a forward call is being
recorded as a plan, is reported to the recorder with its grid resolved to integers and
its arguments (``kz_core/evaluate/recording.py``). Used inside candidate workers only.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from kz_core import LaunchCounter, record_kernel, recording_active


COUNTER = LaunchCounter()
_installed = False


def _wrap(cls: type) -> None:
    original = cls.run
    if getattr(original, "_kz_counts_launches", False):
        return

    @functools.wraps(original)
    def run(self, *args, grid, warmup, **kwargs):
        if warmup:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        name = _kernel_name(getattr(self, "fn", None)) or getattr(self, "__name__", "kernel")
        COUNTER.record(str(name))
        if recording_active() is None:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        resolved = _resolve_grid(self, grid, args, kwargs)
        with record_kernel("triton", {"name": str(name)}, resolved, args, kwargs):
            return original(self, *args, grid=resolved, warmup=warmup, **kwargs)

    run._kz_counts_launches = True  # type: ignore[attr-defined]
    cls.run = run


def _kernel_name(fn: Any) -> str | None:
    """The name a plan step gives a kernel, as the trusted side keys the source's kernels:
    its qualified name (``MinOp.kernel`` for a ``@staticmethod`` kernel kept in a class, so
    that two classes may each keep a ``kernel``), its plain name for a function defined in a
    function (``<locals>``; the trusted side refuses those) or without a qualified name."""
    qualname = getattr(fn, "__qualname__", None)
    if isinstance(qualname, str) and qualname and "<" not in qualname:
        return qualname
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else None


def _resolve_grid(kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...]:
    """The launch grid as integers: a callable grid gets the bound arguments, as Triton
    gives them (parameters by name, defaults filled in)."""
    if not callable(grid):
        return tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    signature = inspect.signature(kernel.fn)
    bound: dict[str, Any] = {}
    names = list(signature.parameters)
    for name, value in zip(names, args):
        bound[name] = value
    for name in names[len(args):]:
        if name in kwargs:
            bound[name] = kwargs[name]
        elif signature.parameters[name].default is not inspect.Parameter.empty:
            bound[name] = signature.parameters[name].default
    resolved = grid(bound)
    return tuple(resolved) if isinstance(resolved, (tuple, list)) else (resolved,)


def _wrap_compiled(cls: type) -> None:
    """Launches of a kernel compiled ahead (``kernel = fn.warmup(...)`` then
    ``kernel[grid](*args)``, as in Triton's fused-softmax tutorial) bypass ``run``: they
    are counted and recorded here, with the compile options the kernel was built with."""
    original = cls.__getitem__
    if getattr(original, "_kz_counts_launches", False):
        return

    @functools.wraps(original)
    def getitem(self, grid):
        runner = original(self, grid)
        fn = getattr(getattr(self, "src", None), "fn", None)
        name = str(_kernel_name(fn) or getattr(self, "name", "kernel"))
        params = set(getattr(fn, "arg_names", ()) or ())

        def counted(*args, **kwargs):
            COUNTER.record(name)
            if recording_active() is None:
                return runner(*args, **kwargs)
            metadata = getattr(self, "metadata", None)
            options = {
                key: getattr(metadata, key)
                for key in ("num_warps", "num_stages", "num_ctas", "maxnreg")
                if key not in params and getattr(metadata, key, None) is not None
            }
            resolved = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
            with record_kernel("triton", {"name": name}, resolved, args, options):
                return runner(*args, **kwargs)

        return counted

    getitem._kz_counts_launches = True  # type: ignore[attr-defined]
    cls.__getitem__ = getitem


def _cpu_do_bench(fn: Any, warmup: Any = 25, rep: Any = 100, grad_to_none: Any = None, quantiles: Any = None, return_mode: str = "mean") -> Any:
    """Triton's benchmarkers under the interpreter, where they need a GPU driver: the
    autotuner's default, ``triton.testing.do_bench`` and ``do_bench_cudagraph`` (what an
    autotuner given ``warmup=``/``rep=``, Triton's older interface, or a hand-written tuner
    calls). One timed call per config (their relative speed on a CPU means little; any
    works), in the shapes Triton returns (a value per quantile, or one number; a list for
    ``return_mode="all"``)."""
    import time

    fn()
    started = time.perf_counter()
    fn()
    elapsed = (time.perf_counter() - started) * 1e3
    if quantiles is not None:
        return [elapsed for _ in quantiles] if len(quantiles) != 1 else elapsed
    return [elapsed] if return_mode == "all" else elapsed


def install() -> LaunchCounter:
    """Wrap Triton's launchers (idempotent) and return the process's counter."""
    global _installed
    if not _installed:
        import os

        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        _wrap(JITFunction)
        _wrap(InterpretedFunction)
        try:
            from triton.compiler.compiler import CompiledKernel

            _wrap_compiled(CompiledKernel)
        except ImportError:  # pragma: no cover - a Triton without it
            pass
        if os.environ.get("TRITON_INTERPRET") == "1":
            from triton.runtime.autotuner import Autotuner

            Autotuner.do_bench = property(lambda self: self._do_bench or _cpu_do_bench)  # type: ignore[assignment]
            import triton.testing

            triton.testing.do_bench = _cpu_do_bench
            triton.testing.do_bench_cudagraph = _cpu_do_bench
            from kz_backend_triton import interpreted_libdevice

            interpreted_libdevice.install()  # libdevice's math, which the interpreter lacks
        _installed = True
    return COUNTER
