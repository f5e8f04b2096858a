"""Problem audit: which problems a cheater can pass without computing anything.

For each problem a reference worker (never a candidate's) runs the reference for two
secret seeds, the first seed again with a freshly built model, and, on a GPU, the first
seed with TF32 allowed. From those outputs, at the tolerance in use:

- ``constant_passes``: the output of one seed passes as the answer for the other, or an
  all-zero or all-mean tensor passes: a constant (or cached) output would be "correct";
- ``input_independent``: the outputs of different seeds are identical;
- ``nondeterministic``: the same seed gives outputs beyond the tolerance apart (dropout
  left on, random ops, non-deterministic atomics): the reference is not self-consistent;
- ``tf32_sensitive``: allowing TF32 moves the fp32 reference beyond the tolerance (an
  exact-fp32 kernel would fail against a TF32 reference; GPU only);
- ``non_finite``: the reference output holds NaN or infinities;
- ``reference_error``: the reference does not run.

This module orchestrates reference workers and compares outputs; it runs no candidates.
A problem file's code may come from anywhere (a Hugging Face dataset, the Proposer's
pool), so each problem runs in a fresh sandboxed reference worker forked by a zygote, as
the evaluator's do (docs/security.md), never with the user's rights.
"""

from __future__ import annotations

import concurrent.futures
import os
import secrets
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import torch

from kz_core.evaluate.correctness import compare, tolerance_for
from kz_core.evaluate.sandbox import WorkerError, WorkerPool, settings_from_config, start_zygote
from kz_core.model import Finding, Problem, Severity
from kz_core.paths import remove_tree, scratch_root as new_scratch_root


@attrs.frozen
class ProblemAudit:
    """What the audit found about one problem (no findings: nothing to worry about)."""

    problem: str
    findings: tuple[Finding, ...] = ()
    device: str = "cpu"

    @property
    def flags(self) -> list[str]:
        return [f.check for f in self.findings]


def outputs_pass(expected: list[Any], actual: list[Any], table: str, atol: float, rtol: float) -> bool:
    """Whether ``actual`` passes as ``expected`` (as many tensors, each within the tolerance
    of its dtype in ``table``)."""
    for want, got in zip(expected, actual):
        found, _, _ = compare(want, got, tolerance_for(want.dtype, table, atol, rtol))
        if any(f.severity is Severity.ERROR for f in found):
            return False
    return len(expected) == len(actual)


def judge_audit(runs: dict[str, Any], table: str, atol: float, rtol: float) -> list[Finding]:
    """Findings from an audit reply's runs (see the module docstring)."""
    first, second, again = runs["first"]["outputs"], runs["second"]["outputs"], runs["again"]["outputs"]
    if any(t is None for t in first + second + again):
        return [Finding("reference_error", "the reference returned something other than tensors")]
    findings = []
    floating = [t for t in first if t.dtype.is_floating_point]
    if any(not bool(torch.isfinite(t).all()) for t in floating):
        findings.append(Finding("non_finite", "the reference output holds NaN or infinities"))
    if all(torch.equal(a, b) for a, b in zip(first, second)):
        findings.append(Finding("input_independent", "two different input seeds give identical outputs"))
    constants = {
        "the output for another seed": first,
        "zeros": [torch.zeros_like(t) for t in second],
        "its mean everywhere": [torch.full_like(t, float(t.double().mean())) if t.dtype.is_floating_point else t for t in second],
    }
    passing = [name for name, guess in constants.items() if outputs_pass(second, guess, table, atol, rtol)]
    if passing:
        findings.append(Finding("constant_passes", f"a constant output passes at the tolerance in use: {', '.join(passing)}"))
    if not outputs_pass(first, again, table, atol, rtol):
        findings.append(Finding("nondeterministic", "the same seed gives outputs beyond the tolerance apart"))
    if "tf32" in runs and any(t.dtype == torch.float32 for t in first) and not outputs_pass(first, runs["tf32"]["outputs"], table, atol, rtol):
        findings.append(Finding("tf32_sensitive", "allowing TF32 moves the fp32 reference beyond the tolerance", Severity.WARNING))
    return findings


def audit_problems(
    problems: Iterable[Problem], config: Any, device: str, progress: Callable[[ProblemAudit], None] | None = None
) -> list[ProblemAudit]:
    """Audit ``problems`` with reference workers on ``device`` (``config``: the eval section)."""
    problems = list(problems)
    settings = settings_from_config(config, device, new_scratch_root("audit", config.scratch_dir))
    workers = config.workers or (min(8, os.cpu_count() or 1) if device == "cpu" else 2)
    zygote = start_zygote(device, settings, config.isolation_off)
    # One fresh sandboxed worker per problem: a problem's code cannot change another's audit.
    pool = WorkerPool(device, "reference", workers, settings, zygote=zygote, single_use=True)
    init_seed, seeds = secrets.randbits(31), [secrets.randbits(62), secrets.randbits(62)]

    def audit(problem: Problem) -> ProblemAudit:
        request = {
            "op": "audit",
            "problem": {"name": problem.name, "code": problem.code, "hash": problem.content_hash},
            "init_seed": init_seed,
            "seeds": seeds,
        }
        try:
            with pool.acquire() as worker:
                reply = worker.call(request, timeout=config.run_timeout_s)
        except WorkerError as exc:
            return ProblemAudit(problem.name, (Finding("reference_error", str(exc)),), device)
        if not reply.get("ok"):
            return ProblemAudit(problem.name, (Finding("reference_error", reply.get("message", "failed")),), device)
        return ProblemAudit(problem.name, tuple(judge_audit(reply["runs"], config.tolerance, config.atol, config.rtol)), device)

    results: list[ProblemAudit | None] = [None] * len(problems)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as executor:
            futures = {executor.submit(audit, p): i for i, p in enumerate(problems)}
            for future in concurrent.futures.as_completed(futures):
                results[futures[future]] = future.result()
                if progress is not None:
                    progress(results[futures[future]])  # type: ignore[arg-type]
    finally:
        try:
            pool.close()
        finally:
            zygote.close()
            remove_tree(settings.scratch_root)  # workers wrote there: never raises
    return results  # type: ignore[return-value]
