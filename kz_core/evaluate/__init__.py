"""Sandboxed, hack-resistant evaluation of candidates: correctness, guards, timing.

``Evaluator(problems, config).evaluate(candidates)`` (or ``await evaluate_async``) returns
one :class:`~kz_core.model.EvalResult` per candidate. See ``evaluator.py`` for the
protocol, ``sandbox.py`` for the worker processes and ``judge.py`` for the guards.
"""

from kz_core.evaluate.evaluator import Evaluator, EvaluatorError, evaluate, resolve_device

__all__ = ["Evaluator", "EvaluatorError", "evaluate", "resolve_device"]
