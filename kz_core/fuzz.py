"""Property-based fuzzing of a candidate against its problem's reference, with hypothesis.

KernelBench checks five seeds at one fixed shape; a kernel that hard-codes its size, drops
its bounds mask or mishandles a non-contiguous input passes. Here hypothesis draws
examples from strategies derived from the problem:

- sizes: the module-level integer constants that ``get_inputs``/``get_init_inputs`` read
  (``batch_size``, ``dim``, ...) rebound together, to boundary sizes (1, 2, 3, 2^k +- 1),
  odd and prime sizes, and anything up to twice the default, within a memory budget;
- values: the default distribution, uniform, heavy-tailed, large and small magnitudes,
  all zeros, sparse zeros (inputs that were non-negative stay non-negative);
- layouts: contiguous, transposed and sliced (non-contiguous) inputs;
- dtypes (only when asked: ``dtypes=True``, ``kz fuzz --dtypes``): float64, float16 and
  bfloat16 inputs where the reference accepts them. Off by default: a kernel written for
  a problem's float32 inputs is not wrong for failing on float16 ones.

Examples the reference rejects (it raises, or its output turns non-finite) are discarded.
Each example runs through the sandboxed evaluator: the reference in a reference worker,
the candidate in a candidate worker that loads it once for the whole run, the judgement
here. Hypothesis shrinks a failure to the smallest example and reports it with the first
mismatching index and both values.

For your own tests::

    from hypothesis import given, settings
    from kz_core.fuzz import FuzzSession, examples

    session = FuzzSession(problem, candidate)        # starts sandboxed workers once

    @settings(max_examples=50, deadline=None)
    @given(examples(problem))
    def test_my_kernel(example):
        session.check(example)                       # AssertionError with the details

This module decides nothing about the verdict of ``kz eval`` except through the ``fuzz``
finding that ``kz eval --fuzz N`` adds.
"""

from __future__ import annotations

from typing import Any

from kz_core.evaluate import Evaluator
from kz_core.evaluate.fuzzing import (
    CPU_DTYPES,
    DTYPES,
    FuzzExample,
    FuzzFailure,
    FuzzReport,
    _special_sizes,
    examples,
    sizes,
)
from kz_core.evaluate.fuzzing import FuzzSession as _EvaluatorSession
from kz_core.model import Candidate, Problem

__all__ = ["CPU_DTYPES", "DTYPES", "FuzzExample", "FuzzFailure", "FuzzReport", "FuzzSession", "examples", "fuzz_candidate", "sizes"]


class FuzzSession(_EvaluatorSession):
    """A candidate loaded once in a sandboxed worker and checked on any number of examples.

    :param problem: the problem.
    :param candidate: the candidate for it.
    :param config: the ``eval`` config section (defaults when None), for a private evaluator.
    :param evaluator: an evaluator whose workers to use (a private one when None, closed
        with the session).
    :param worker: a candidate worker that already holds this candidate.
    """

    def __init__(self, problem: Problem, candidate: Candidate, config: Any = None, *, evaluator: Any = None, worker: Any = None, executor: Any = None):
        own = evaluator is None
        super().__init__(problem, candidate, evaluator=Evaluator([problem], config) if own else evaluator, worker=worker, executor=executor)
        self._own_evaluator = own


def fuzz_candidate(
    problem: Problem, candidate: Candidate, *, max_examples: int = 100, seed: int | None = None, dtypes: bool = False, config: Any = None
) -> FuzzReport:
    """Fuzz one candidate with a private evaluator (see :class:`FuzzSession`)."""
    with FuzzSession(problem, candidate, config) as session:
        return session.run(max_examples, seed, dtypes)
