"""Sampling kernel candidates from a policy and evaluating them: the Coder's side of a run.

``sample_candidates`` turns problems into Coder prompts, asks the installed policy for
``n`` completions each (``sample_completions`` hook) and parses every completion into a
candidate, or notes why it holds none. ``evaluate_samples`` evaluates the parsed ones and
gives the others a ``format_error`` result, so that every sample has a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from kz_core.errors import KzError
from kz_core.model import Candidate, Completion, EvalResult, Finding, Problem, Verdict
from kz_core.parsing import extract_code
from kz_core.prompts import coder_prompt


class PolicyUnavailableError(KzError, RuntimeError):
    """No installed plugin answers ``sample_completions`` for the configured sampler."""


@attrs.frozen
class Sample:
    """One completion and the candidate parsed from it.

    :ivar problem: the problem's name.
    :ivar sample_id: ``0`` .. ``n-1`` for the problem.
    :ivar backend: the backend the prompt asked for.
    :ivar text: the model's reply, verbatim.
    :ivar tokens: tokens generated.
    :ivar code: the candidate's source, or None.
    :ivar reason: why there is no candidate (empty when there is one).
    """

    problem: str
    sample_id: str
    backend: str
    text: str
    tokens: int = 0
    code: str | None = None
    reason: str = ""

    @property
    def candidate(self) -> Candidate | None:
        return None if self.code is None else Candidate(self.problem, self.backend, self.code, self.sample_id)


def sample_candidates(problems: Sequence[Problem], n: int, backend: str, policy_config: Any, pm: Any) -> list[Sample]:
    """``n`` parsed samples per problem from the configured policy (Coder role)."""
    prompts = [coder_prompt(problem, backend, policy_config) for problem in problems]
    completions: list[list[Completion]] | None = pm.hook.sample_completions(prompts=prompts, n=n, role="coder", config=policy_config)
    if completions is None:
        raise PolicyUnavailableError(
            f"no installed plugin samples with policy.sampler={policy_config.sampler!r}: install kz-policy-hf (sampler 'hf') or set policy.sampler"
        )
    samples = []
    for problem, group in zip(problems, completions):
        for completion in group:
            parsed = extract_code(completion.text)
            samples.append(
                Sample(problem.name, str(completion.sample_index), backend, completion.text, completion.tokens, parsed.code, parsed.reason)
            )
    return samples


def format_error_result(sample: Sample, problem: Problem | None) -> EvalResult:
    """The result of a sample whose reply held no candidate."""
    return EvalResult(
        problem=sample.problem,
        sample_id=sample.sample_id,
        backend=sample.backend,
        verdict=Verdict.FORMAT_ERROR,
        findings=(Finding("no_candidate", sample.reason),),
        problem_hash=problem.content_hash if problem else "",
        message=f"format_error: no_candidate: {sample.reason}",
    )


def sample_journal_key(sample: Sample, evaluator: Any) -> str:
    """The key of ``sample``'s result in the evaluator's journal: the evaluator's own key for
    a candidate, and one of the reply's text for a reply without a candidate."""
    from kz_core.evaluate.journal import result_key
    from kz_core.model import content_hash

    candidate = sample.candidate
    if candidate is not None:
        return evaluator.journal_key(candidate)
    problem = evaluator.problems.get(sample.problem)
    return result_key(problem.content_hash if problem else "", content_hash(sample.text), sample.backend, "no_candidate")


def journaled_count(samples: Sequence[Sample], evaluator: Any) -> int:
    """How many of ``samples`` already have a result in the evaluator's journal (0 without
    a journal, or with ``eval.cache`` off): the evaluations a re-run reuses."""
    if evaluator.journal is None or not evaluator.config.cache:
        return 0
    return sum(evaluator.journal.get(sample_journal_key(sample, evaluator)) is not None for sample in samples)


def evaluate_samples(samples: Sequence[Sample], evaluator: Any, progress: Callable[[EvalResult], None] | None = None) -> list[EvalResult]:
    """One result per sample, in order: evaluated candidates, and format errors for the rest
    (journaled too, when the evaluator has a journal)."""
    candidates = [s.candidate for s in samples if s.candidate is not None]
    evaluated = iter(evaluator.evaluate(candidates, progress=progress))
    results = []
    for sample in samples:
        if sample.candidate is not None:
            results.append(next(evaluated))
            continue
        result = format_error_result(sample, evaluator.problems.get(sample.problem))
        if evaluator.journal is not None:
            evaluator.journal.put(sample_journal_key(sample, evaluator), result)
        if progress is not None:
            progress(result)
        results.append(result)
    return results
