"""Sandboxed, hack-resistant evaluation of candidates: correctness, guards, timing.

``Evaluator(problems, config).evaluate(candidates)`` (or ``await evaluate_async``) returns
one :class:`~kz_core.model.EvalResult` per candidate. See ``evaluator.py`` for the
protocol, ``sandbox.py`` for the worker processes and ``judge.py`` for the guards.

The names below are imported from ``evaluator.py`` on first use, not with the package:
``kz`` loads its default plugins at start-up (``kz_core.evaluate.guards`` among them), and
the evaluator brings torch with it (seconds of every ``kz`` command, ``kz config show`` as
much as ``kz eval``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kz_core.evaluate.evaluator import Evaluator, EvaluatorError, evaluate, resolve_device

__all__ = ["Evaluator", "EvaluatorError", "evaluate", "resolve_device"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kz_core.evaluate import evaluator

        return getattr(evaluator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
