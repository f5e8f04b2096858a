"""The Coder's reward: completions -> evaluator -> shaped rewards (the KernelZero method's,
for any trainer plugin; kz-policy-hf hands it to TRL's GRPOTrainer).

:class:`CoderReward` is an async callable with TRL's reward-function signature (``prompts``,
``completions``, one ``problem`` name per completion), which other RL libraries' reward
functions share or wrap in one line. For a batch
of completions it parses each into a candidate (``kz_core.parsing``), evaluates them all at
once with the sandboxed evaluator (format errors need no evaluation), groups the results
by problem (a GRPO group is the ``num_generations`` completions of one prompt), and asks
the ``shape_rewards`` hook for one reward per completion (CA-GRPO by default). It records,
for every step: the rewards, the correctness rate, how many groups had the CA-GRPO gate
open (rate >= ``reward.tau``), how many groups' rewards differ (``signal_groups``: the
others give GRPO zero advantages), the verdict counts and the seconds spent waiting for the
evaluator. A trainer that runs in several processes, each rewarding its own completions,
merges the processes' records of a step with :meth:`CoderReward.merge_step_records`.

It is picklable: the evaluator (worker processes) is not pickled; it starts on first use
in whichever process calls it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kz_core.errors import KzError
from kz_core.generate import Sample, evaluate_samples
from kz_core.model import EvalResult, Problem
from kz_core.parsing import extract_code


class RewardUnavailableError(KzError, RuntimeError):
    """No installed plugin shapes rewards for ``reward.name``."""


def completion_text(completion: Any) -> str:
    """The assistant's text in a TRL completion (conversational or plain)."""
    if isinstance(completion, list):
        return "".join(str(message.get("content", "")) for message in completion if isinstance(message, dict))
    return str(completion)


class CoderReward:
    """Rewards for Coder completions (see the module docstring).

    :param problems: the training problems, by name.
    :param config: the resolved kz config (``eval``, ``reward`` and ``eval.backend`` are used).
    :param journal: where per-sample results are recorded (optional).
    """

    __name__ = "kz_reward"

    def __init__(self, problems: Sequence[Problem], config: Any, journal: Any = None):
        self.problems = {p.name: p for p in problems}
        self.config = config
        self.journal = journal
        self.step_log: list[dict[str, Any]] = []
        self._evaluator: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_evaluator"] = None
        state["journal"] = None
        return state

    def evaluator(self) -> Any:
        if self._evaluator is None:
            from kz_core.evaluate import Evaluator

            self._evaluator = Evaluator(self.problems.values(), self.config.eval, journal=self.journal)
        return self._evaluator

    def close(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None

    def results(self, problems: Sequence[str], completions: Sequence[Any]) -> list[EvalResult]:
        """One evaluation result per completion, in order."""
        backend = self.config.eval.backend
        counters: Counter[str] = Counter()
        samples = []
        for problem, completion in zip(problems, completions):
            text = completion_text(completion)
            parsed = extract_code(text)
            samples.append(Sample(problem, str(counters[problem]), backend, text, 0, parsed.code, parsed.reason))
            counters[problem] += 1
        return evaluate_samples(samples, self.evaluator())

    def shape(self, problems: Sequence[str], results: Sequence[EvalResult]) -> list[float]:
        """Rewards through the ``shape_rewards`` hook, one group per problem."""
        from kz_core.plugins import get_plugin_manager

        pm = get_plugin_manager()
        rewards = [0.0] * len(results)
        for problem in dict.fromkeys(problems):
            indices = [i for i, name in enumerate(problems) if name == problem]
            shaped = pm.hook.shape_rewards(role="coder", results=[results[i] for i in indices], config=self.config.reward)
            if shaped is None:
                raise RewardUnavailableError(f"no installed plugin shapes rewards for reward.name={self.config.reward.name!r}: install kz-reward-cagrpo")
            for index, value in zip(indices, shaped):
                rewards[index] = float(value)
        return rewards

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], problem: Sequence[str], **kwargs: Any) -> list[float]:
        started = time.perf_counter()
        # The evaluator blocks on its workers; a thread keeps TRL's event loop free.
        results = await asyncio.to_thread(self.results, list(problem), completions)
        waited = time.perf_counter() - started
        rewards = self.shape(list(problem), results)
        self._record(list(problem), results, rewards, waited, kwargs)
        return rewards

    def _record(self, problems: list[str], results: list[EvalResult], rewards: list[float], waited: float, kwargs: dict[str, Any]) -> None:
        by_problem: dict[str, list[bool]] = {}
        rewards_by_problem: dict[str, list[float]] = {}
        for name, result, value in zip(problems, results, rewards):
            by_problem.setdefault(name, []).append(result.correct)
            rewards_by_problem.setdefault(name, []).append(value)
        rates = [sum(flags) / len(flags) for flags in by_problem.values()]
        state = kwargs.get("trainer_state")
        entry = {
            "step": getattr(state, "global_step", len(self.step_log)),
            "reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
            "correct_rate": sum(r.correct for r in results) / len(results) if results else 0.0,
            # A gated reward (CA-GRPO's reward.tau): how many groups had speed switched on.
            "gate_open_groups": sum(rate >= tau for rate in rates) if (tau := getattr(self.config.reward, "tau", None)) is not None else 0,
            "groups": len(rates),
            # Groups whose rewards differ: GRPO's advantages are zero in the others, so these
            # are the groups the step learns from (what the frontier's selection is for).
            "signal_groups": sum(max(values) - min(values) > 1e-9 for values in rewards_by_problem.values()),
            "verdicts": dict(Counter(r.verdict.value for r in results)),
            "reward_wait_s": waited,
            "speed_measured": any(r.speedups for r in results),
            **_speed_record(results, self.config.reward.speed_baseline),
        }
        self.step_log.append(entry)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for key in ("correct_rate", "gate_open_groups", "reward_wait_s"):
                log_metric(f"kz/{key}", float(entry[key]))

    @staticmethod
    def merge_step_records(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """One step's record for the whole batch from the records of the processes that
        judged its parts (several training processes each reward their own completions):
        counts add up, rates and the mean reward are weighted by completions, the wait is
        the longest (the step goes on when the slowest process has its rewards). A process
        that judged nothing yet gives an empty record and weighs nothing; when none judged
        anything, the rates are None."""
        judged = [(record, sum((record.get("verdicts") or {}).values())) for record in records]
        total = sum(count for _, count in judged)
        verdicts: Counter[str] = Counter()
        for record, _ in judged:
            verdicts.update(record.get("verdicts") or {})

        def weighted(key: str) -> float | None:
            return sum(float(record.get(key) or 0.0) * count for record, count in judged) / total if total else None

        return {
            "step": max((record.get("step", 0) for record in records), default=0),
            "reward_mean": weighted("reward_mean"),
            "correct_rate": weighted("correct_rate"),
            "gate_open_groups": sum(record.get("gate_open_groups", 0) for record in records),
            "groups": sum(record.get("groups", 0) for record in records),
            "signal_groups": sum(record.get("signal_groups", 0) for record in records),
            "verdicts": dict(verdicts),
            "reward_wait_s": max((record.get("reward_wait_s", 0.0) for record in records), default=0.0),
            "speed_measured": any(record.get("speed_measured") for record in records),
            **_merged_speed(records),
        }


def _speed_record(results: Sequence[EvalResult], baseline: str) -> dict[str, Any]:
    """A step's speed, against ``baseline`` (``reward.speed_baseline``): the geometric mean
    speedup of its correct results that have one (``speedup_geomean``, None when none has),
    how many those were (``speedup_count``), and ``fast_1``, the share of all its results
    that are correct and faster than the baseline (None when no speed was measured, as on
    a CPU, where 0 would read as "all slower")."""
    logs = [math.log(r.speedups[baseline]) for r in results if r.correct and (r.speedups or {}).get(baseline, 0.0) > 0.0]
    return {
        "speedup_geomean": math.exp(sum(logs) / len(logs)) if logs else None,
        "speedup_count": len(logs),
        "fast_1": sum(value > 0.0 for value in logs) / len(results) if logs and results else None,
    }


def _merged_speed(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """:func:`_speed_record` of a batch from its parts' records: log-means weighted by their
    counts, ``fast_1`` over every part's completions (a part without a fast result adds none)."""
    measured = [r for r in records if r.get("speedup_count") and r.get("speedup_geomean")]
    count = sum(r["speedup_count"] for r in measured)
    completions = sum(sum((r.get("verdicts") or {}).values()) for r in records) if measured else 0
    return {
        "speedup_geomean": math.exp(sum(r["speedup_count"] * math.log(r["speedup_geomean"]) for r in measured) / count) if count else None,
        "speedup_count": count,
        "fast_1": sum((r.get("fast_1") or 0.0) * sum((r.get("verdicts") or {}).values()) for r in measured) / completions if completions else None,
    }
