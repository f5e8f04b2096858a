"""The fuzzing engine behind ``kz fuzz`` and ``kz eval --fuzz`` (``kz_core/fuzz.py`` is its
public face): strategies derived from a problem, and a session that checks a candidate on
examples through an evaluator's workers.

It runs on an evaluator it is given and never imports one, so that the evaluator can use
it (``eval.fuzz``) without an import cycle.
"""

from __future__ import annotations

import math
import time
from typing import Any

import attrs
import hypothesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from kz_core.evaluate.calls import call_worker, problem_payload
from kz_core.evaluate.execution import DISTRIBUTIONS, LAYOUTS
from kz_core.evaluate.judge import judge_trials, refused_unverified
from kz_core.evaluate.replies import validate_trials
from kz_core.evaluate.variants import size_constants
from kz_core.model import Candidate, Finding, Problem, Severity

#: Input dtypes tried besides the problem's own (None), when dtypes are fuzzed. On a CPU
#: too: Triton's interpreter computed bfloat16 on its bit patterns and refused its atomics
#: until kz mended it (``kz_backend_triton.interpreted_bfloat16``), and bfloat16 was left
#: out there until then.
DTYPES = (None, "float64", "float16", "bfloat16")
CPU_DTYPES = DTYPES

#: Seconds of shrinking after the first failure; then the smallest failing example so far
#: is reported (each attempt on a crashing kernel costs a fresh worker).
SHRINK_BUDGET_S = 60.0
#: Largest allowed growth of the inputs' total size over the default sizes.
MEMORY_FACTOR = 4.0


@attrs.frozen
class FuzzExample:
    """One drawn example: size rebindings, value distribution, layout, dtype, seed."""

    overrides: dict[str, int] = attrs.field(factory=dict)
    distribution: str = "default"
    layout: str = "contiguous"
    dtype: str | None = None
    seed: int = 0

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.overrides.items()) or "default sizes"
        return f"{sizes}; values {self.distribution}; layout {self.layout}; dtype {self.dtype or 'as generated'}; seed {self.seed}"


def _special_sizes(default: int) -> list[int]:
    """Sizes that break kernels: tiny, powers of two +- 1, odd and prime, around the default."""
    specials = [1, 2, 3, 5, 7, 31, 33, 127, 129, 257, 1023, 1025, default - 1, default + 1]
    prime = default + 1
    while any(prime % d == 0 for d in range(2, int(math.isqrt(prime)) + 1)):
        prime += 1
    specials.append(prime)
    return sorted({s for s in specials if 1 <= s <= 2 * default})


def sizes(problem: Problem) -> st.SearchStrategy[dict[str, int]]:
    """Rebindings of the problem's size constants (shrinking towards small sizes)."""
    constants = size_constants(problem.code)
    if not constants:
        return st.just({})
    per_name = {
        name: st.one_of(st.sampled_from(_special_sizes(value)), st.integers(1, 2 * value)) for name, value in constants.items()
    }

    def within_budget(drawn: dict[str, int]) -> bool:
        growth = math.prod(drawn[name] / value for name, value in constants.items())
        return growth <= MEMORY_FACTOR

    return st.fixed_dictionaries(per_name).filter(within_budget)


def examples(problem: Problem, *, dtypes: bool = False, device: str = "cuda") -> st.SearchStrategy[FuzzExample]:
    """Fuzz examples for ``problem`` (see the module docstring)."""
    choices = (CPU_DTYPES if device == "cpu" else DTYPES) if dtypes else (None,)
    return st.builds(
        FuzzExample,
        overrides=sizes(problem),
        distribution=st.sampled_from(DISTRIBUTIONS),
        layout=st.sampled_from(LAYOUTS),
        dtype=st.sampled_from(choices),
        seed=st.integers(0, 2**31 - 1),
    )


class FuzzFailure(AssertionError):
    """A candidate failed a fuzz example; ``findings`` say how, ``example`` on what."""

    def __init__(self, example: FuzzExample, findings: list[Finding]):
        self.example = example
        self.findings = findings
        errors = [f for f in findings if f.severity is Severity.ERROR]
        detail = "; ".join(f"{f.check}: {f.message}" for f in errors[:3])
        super().__init__(f"at {example.describe()}: {detail}")


def _example_trials(worker: Any, request: dict[str, Any], example: FuzzExample, timeout_s: float, who: str) -> dict[str, Any]:
    """The checked trial reply of ``who`` (the candidate or the executor) for one example."""
    trials, failure = call_worker(worker, request, timeout_s, "fuzz example")
    if failure is not None or trials is None:
        raise FuzzFailure(example, [failure] if failure is not None else [Finding("runtime_error", "no reply")])
    try:
        return validate_trials(trials, {example.seed})
    except ValueError as exc:  # ReplyError, or a value that does not parse
        raise FuzzFailure(example, [Finding("runtime_error", f"the {who}'s reply is malformed: {exc}")]) from exc


@attrs.frozen
class FuzzReport:
    """The outcome of fuzzing one candidate.

    :ivar examples: examples run against the candidate.
    :ivar discarded: examples the reference did not accept.
    :ivar failure: the smallest failing example and why, or empty when it held.
    :ivar example: that example (None when nothing failed).
    :ivar error: why fuzzing could not start (the candidate does not load), or empty.
    """

    problem: str
    sample_id: str
    backend: str
    examples: int = 0
    discarded: int = 0
    failure: str = ""
    example: FuzzExample | None = None
    seconds: float = 0.0
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.failure and not self.error


class FuzzSession:
    """A candidate loaded once in a sandboxed worker and checked on any number of examples.

    :param problem: the problem.
    :param candidate: the candidate for it.
    :param evaluator: the evaluator whose workers to use (``kz_core.fuzz.FuzzSession`` makes
        a private one when none is given).
    :param worker: a candidate worker that already holds this candidate (``kz eval --fuzz``).
    """

    def __init__(self, problem: Problem, candidate: Candidate, *, evaluator: Any, worker: Any = None, executor: Any = None):
        self.problem = problem
        self.candidate = candidate
        self._own_evaluator = False
        #: The evaluator given (closed with the session when it is a private one), and the
        #: single-device one whose workers this session uses (``Evaluator.lane_for``).
        self.owner = evaluator
        self.evaluator = evaluator.lane_for(problem.name) if hasattr(evaluator, "lane_for") else evaluator
        self._worker = worker
        self._lease: Any = None
        self._executor = executor
        self._executor_lease: Any = None
        self._own_executor = executor is None
        self._plans: set[str] = set()
        self.examples_run = 0
        self.discarded = 0
        info = self.evaluator.backends.get(candidate.backend)
        #: Examples are recorded in the candidate's process and replayed by a trusted
        #: executor (as ``kz eval`` does for backends with trusted kernels).
        self.verified = bool(info is not None and info.trusted_kernels and (self.evaluator.device != "cpu" or info.runs_on_cpu))
        #: A backend with ``unverified_fallback``: an example whose forward cannot be
        #: recorded moves the session to its candidate's own process (as ``kz eval`` does).
        #: Where the backend allows that route but the setting leaves it off, such an
        #: example is refused as ``kz eval`` refuses such a candidate.
        self._route = bool(info is not None and info.unverified_fallback)
        self.fallback = self._route and self.evaluator.config.unverified_fallback
        #: Why the session runs unverified after starting verified, if it does.
        self.unverified = ""

    def __enter__(self) -> FuzzSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._release()
        if self._own_evaluator:
            self.owner.close()

    def _release(self) -> None:
        self._release_worker()
        self._release_executor()

    def _release_worker(self) -> None:
        if self._lease is not None:
            if self._worker is not None and self.verified:
                self._worker.kill()  # a candidate's process never outlives its use
            self._lease.__exit__(None, None, None)
            self._lease = None
            self._worker = None

    def _release_executor(self) -> None:
        if self._executor_lease is not None:
            self._executor_lease.__exit__(None, None, None)
            self._executor_lease = None
            self._executor = None

    def _prepared_executor(self) -> Any:
        """The executor that replays this candidate's plans (prepared once)."""
        if self._executor is not None and not self._executor.retired:
            return self._executor
        if not self._own_executor:
            raise RuntimeError("the executor that held this candidate's plans is gone")
        self._executor_lease = self.evaluator._executor_pool.acquire()
        executor = self._executor_lease.__enter__()
        request = {"op": "prepare", "candidate": attrs.asdict(self.candidate), "problem": problem_payload(self.problem), "plans": {}}
        reply, failure = call_worker(executor, request, self.evaluator.config.compile_timeout_s, "compile")
        if failure is not None or reply is None or reply.get("failure"):
            message = failure.message if failure is not None else (reply or {}).get("failure", {}).get("message", "no reply")
            raise RuntimeError(f"the candidate's kernels do not build, so it cannot be fuzzed: {message}")
        self._executor = executor
        self._plans = set()
        return executor

    def _verified_trials(self, example: FuzzExample, request: dict[str, Any]) -> dict[str, Any] | None:
        """Record a plan for the example's shapes (decoy values) in the candidate's
        process, then replay it on the example in the executor; None when the forward
        cannot be recorded and the backend falls back to running it unverified."""
        import json
        import secrets

        config = self.evaluator.config
        executor = self._prepared_executor()
        key = "fuzz:" + json.dumps([example.overrides, example.dtype, example.layout], sort_keys=True)
        if key not in self._plans:
            worker = self._loaded_worker()
            # Decoys of the example's sizes, layout and dtype but the default values: a
            # forward that chooses its path by its inputs' values (an unstable kernel
            # guarded by a peek at a few elements) is replayed on the example's values with
            # the path its decoys chose, and fails where that path is wrong.
            decoys = attrs.evolve(example, distribution="default")
            signature = {"key": key, "seed": secrets.randbits(62), "overrides": example.overrides, "example": attrs.asdict(decoys)}
            record = {**request, "op": "record", "signatures": [signature], "warmup": 1, "max_constant_bytes": int(config.plan_constant_mb) << 20}
            reply, failure = call_worker(worker, record, config.compile_timeout_s + config.run_timeout_s, "recording forward")
            if failure is not None or reply is None:
                raise FuzzFailure(example, [failure] if failure is not None else [Finding("runtime_error", "no reply")])
            plans, constants, unreplayable = self.evaluator._received_plans(reply, required=key)
            if unreplayable is not None and unreplayable.check == "not_replayable" and self.fallback:
                return None
            if unreplayable is not None:
                if unreplayable.check == "not_replayable" and self._route:
                    unreplayable = refused_unverified(unreplayable)
                raise FuzzFailure(example, [unreplayable])
            added, failure = call_worker(executor, {"op": "add_plans", "plans": {key: (plans[key], constants[key])}}, config.run_timeout_s, "fuzz example")
            if failure is not None:
                raise FuzzFailure(example, [failure])
            self._plans.add(key)
        trial = {"seed": example.seed, "plan": key, "overrides": example.overrides, "example": attrs.asdict(example)}
        trials = _example_trials(executor, {**request, "op": "execute", "trials": [trial]}, example, config.run_timeout_s, "executor")
        ops = {name: None for record in trials["trials"] for name in record.get("compute_ops", [])}
        trials["compute_ops"] = list(ops)
        return trials

    def _loaded_worker(self) -> Any:
        """A candidate worker holding this candidate (loaded again if its worker died)."""
        if self._worker is not None and not self._worker.retired:
            return self._worker
        self._release_worker()
        self._lease = self.evaluator._candidate_pool.acquire()
        worker = self._lease.__enter__()
        _, failure = self.evaluator._load(worker, self.candidate, self.problem)
        if failure is not None:
            self._release_worker()
            raise RuntimeError(f"the candidate does not load, so it cannot be fuzzed: {failure.message}")
        self._worker = worker
        return worker

    def check(self, example: FuzzExample) -> None:
        """Run one example. Raises :class:`FuzzFailure` when the candidate fails it; calls
        ``hypothesis.reject()`` when the reference does not accept the example."""
        config = self.evaluator.config
        request = {"problem": problem_payload(self.problem), "init_seed": self.evaluator.seeds.init}
        with self.evaluator.references.worker(self.problem) as reference_worker:
            reply, failure = call_worker(reference_worker, {**request, "op": "fuzz_reference", "example": attrs.asdict(example)}, config.run_timeout_s, "reference")
        if failure is not None or reply is None or not _finite_enough(reply["trial"]):
            self.discarded += 1
            hypothesis.reject()
        reference = {example.seed: reply["trial"]}
        self.examples_run += 1
        trials = self._verified_trials(example, request) if self.verified else None
        if self.verified and trials is None:
            # The forward cannot be recorded (BackendInfo.unverified_fallback): this example
            # and the rest run in the candidate's own process, whose recording worker goes.
            self._release()
            self.verified = False
            self.unverified = "its forward could not be recorded for the trusted executor, so the examples ran in its own process"
            from loguru import logger

            logger.warning("{}/{} (unverified_execution): {}", self.problem.name, self.candidate.sample_id, self.unverified)
        if trials is None:
            worker = self._loaded_worker()
            trials = _example_trials(worker, {**request, "op": "fuzz_trials", "examples": [attrs.asdict(example)]}, example, config.run_timeout_s, "candidate")
        findings, _, _, _ = judge_trials(
            self.problem,
            reference,
            trials,
            pm=self.evaluator.pm,
            tolerance_table=config.tolerance,
            atol=_scaled_atol(example, reply["trial"], config),
            rtol=config.rtol,
            guards=config.guards,
        )
        if any(f.severity is Severity.ERROR for f in findings):
            raise FuzzFailure(example, findings)

    def run(self, max_examples: int = 100, seed: int | None = None, dtypes: bool = False, shrink_s: float = SHRINK_BUDGET_S) -> FuzzReport:
        """Fuzz with up to ``max_examples`` examples; a failure is shrunk to the smallest
        found within ``shrink_s`` seconds of the first failure (a crashing kernel costs a
        worker per attempt: unbounded, shrinking took minutes)."""
        import json

        started = time.perf_counter()
        failures: list[FuzzFailure] = []
        seen_failing: dict[str, FuzzFailure] = {}
        first_failure: list[float] = []
        cut_short: list[bool] = []

        @settings(
            max_examples=max_examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
            report_multiple_bugs=False,
        )
        @hypothesis.given(examples(self.problem, dtypes=dtypes, device=self.evaluator.device))
        def property_holds(example: FuzzExample) -> None:
            key = json.dumps(attrs.asdict(example), sort_keys=True, default=str)
            if key in seen_failing:
                failures.append(seen_failing[key])
                raise seen_failing[key]
            if first_failure and time.perf_counter() - first_failure[0] > shrink_s:
                cut_short.append(True)
                return  # shrinking is over: untried examples count as passing, known failures still fail
            try:
                self.check(example)
            except FuzzFailure as failure:
                seen_failing[key] = failure
                first_failure[:] = first_failure or [time.perf_counter()]
                failures.append(failure)
                raise

        if seed is not None:
            property_holds = hypothesis.seed(seed)(property_holds)
        report = dict(problem=self.problem.name, sample_id=self.candidate.sample_id, backend=self.candidate.backend)
        try:
            property_holds()
        except FuzzFailure:
            smallest = failures[-1]  # hypothesis replays the shrunk example last
            note = f" (shrinking stopped after {shrink_s:g} s)" if cut_short else ""
            return FuzzReport(**report, examples=self.examples_run, discarded=self.discarded, failure=str(smallest) + note, example=smallest.example, seconds=time.perf_counter() - started)
        except hypothesis.errors.Unsatisfiable:
            return FuzzReport(**report, examples=self.examples_run, discarded=self.discarded, error="the reference accepted none of the drawn examples", seconds=time.perf_counter() - started)
        except RuntimeError as exc:
            return FuzzReport(**report, examples=self.examples_run, discarded=self.discarded, error=str(exc), seconds=time.perf_counter() - started)
        return FuzzReport(**report, examples=self.examples_run, discarded=self.discarded, seconds=time.perf_counter() - started)


#: Distributions that magnify values: the absolute tolerance follows the output's scale.
MAGNIFYING = frozenset({"large", "heavy_tailed"})


def _scaled_atol(example: FuzzExample, trial: dict[str, Any], config: Any) -> float:
    """The absolute tolerance for an example: the configured one, except for magnified
    values, where it is multiplied by the reference output's mean magnitude (when above
    1). A sum of large terms that nearly cancel keeps the error of its terms, not of its
    result; at the problem's own scale the absolute tolerance covers that, and scaling it
    keeps the judgement the same at any scale."""
    from kz_core.evaluate.correctness import tolerance_for

    if example.distribution not in MAGNIFYING:
        return config.atol
    outputs = [t for t in trial["outputs"] if t is not None and t.is_floating_point() and t.numel()]
    if not outputs:
        return config.atol
    scale = max(1.0, max(float(t.double().abs().mean()) for t in outputs))
    base = tolerance_for(outputs[0].dtype, config.tolerance, config.atol, config.rtol).atol
    return base * scale


def _finite_enough(trial: dict[str, Any]) -> bool:
    """Whether the reference's outputs are all finite (examples that overflow the
    reference say nothing about the candidate)."""
    import torch

    return all(t is None or not t.is_floating_point() or bool(torch.isfinite(t).all()) for t in trial["outputs"])
