"""Counting Triton kernel launches through Triton's own launch path.

``kernel[grid](...)`` ends in ``JITFunction.run`` (compiled kernels on a GPU) or
``InterpretedFunction.run`` (the interpreter on a CPU); autotuned and heuristic kernels
reach the same methods. :func:`install` wraps both once per process so that every launch
that is not a warm-up increments :data:`COUNTER`. Used inside evaluation workers only.
"""

from __future__ import annotations

import functools

from kz_core.backend import LaunchCounter


COUNTER = LaunchCounter()
_installed = False


def _wrap(cls: type) -> None:
    original = cls.run
    if getattr(original, "_kz_counts_launches", False):
        return

    @functools.wraps(original)
    def run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            name = getattr(getattr(self, "fn", None), "__name__", None) or getattr(self, "__name__", "kernel")
            COUNTER.record(str(name))
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    run._kz_counts_launches = True  # type: ignore[attr-defined]
    cls.run = run


def install() -> LaunchCounter:
    """Wrap Triton's launchers (idempotent) and return the process's counter."""
    global _installed
    if not _installed:
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        _wrap(JITFunction)
        _wrap(InterpretedFunction)
        _installed = True
    return COUNTER
