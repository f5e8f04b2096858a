"""The Proposer's reward: modules -> learnability (the KernelZero method's, for any trainer
plugin; kz-policy-hf hands it to TRL's GRPOTrainer).

:class:`ProposerReward` is an async callable with TRL's reward-function signature. For a
batch of completions (each a module written for an API set, the dataset's ``apis`` column)
it:

1. parses each completion (``kz_core.parsing``) and validates the modules in sandboxed
   workers (``kz_core.proposer.validate``; ``duplicate`` compares with the pool's valid
   modules), and adds every module to the pool (``pool.sqlite``), valid or not;
2. asks the Coder policy (``sample_completions`` hook, role ``coder``, the ``policy``
   section) for ``proposer.coder_samples`` kernels per valid module and evaluates them with
   the sandboxed evaluator (``kz_core.generate``); the results go into the pool's Coder
   statistics;
3. asks the ``shape_rewards`` hook (role ``proposer``, the ``proposer`` section) for each
   module's reward: learnability under the current Coder by default, -1 for an invalid
   module (see ``kz_core/proposer/reward.py`` for the convention);
4. subtracts ``proposer.repetition_penalty`` times the module's largest similarity to
   another module of the same batch (valid modules only: an invalid module keeps -1, the
   lowest reward).

It records, for every call: the rewards, the valid share, invalid modules by reason, the
Coder's correctness rate on the valid modules and the seconds spent. It is picklable: the
validator, the evaluator and the pool (worker processes, a database connection) are not
pickled; they start on first use in whichever process calls it.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kz_core.model import EvalResult
from kz_core.parsing import extract_code
from kz_core.rewards.coder import RewardUnavailableError, completion_text

#: Separator of API names in the dataset's ``apis`` column.
API_SEPARATOR = "+"


class ProposerReward:
    """Rewards for Proposer completions (see the module docstring).

    :param config: the resolved kz config (``proposer``, ``policy``, ``eval`` are used).
    :param pool_path: the module pool's file (``<run dir>/pool.sqlite``); None: no pool
        (nothing recorded, no duplicates against earlier modules).
    :param journal: where the Coder's per-sample results are recorded (optional).
    """

    __name__ = "kz_proposer_reward"

    def __init__(self, config: Any, pool_path: Path | str | None = None, journal: Any = None):
        self.config = config
        self.pool_path = None if pool_path is None else str(pool_path)
        self.journal = journal
        self.step_log: list[dict[str, Any]] = []
        self.calls = 0
        self.last_repetition: list[float] = []
        self._validator: Any = None
        self._evaluator: Any = None
        self._pool: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_validator=None, _evaluator=None, _pool=None, journal=None)
        return state

    # -- resources, started on first use ----------------------------------------------

    def pool(self) -> Any:
        if self._pool is None and self.pool_path is not None:
            from kz_core.proposer.pool import ModulePool

            self._pool = ModulePool(self.pool_path)
        return self._pool

    def validator(self) -> Any:
        if self._validator is None:
            from kz_core.proposer.validate import ModuleValidator

            self._validator = ModuleValidator(self.config)
        return self._validator

    def evaluator(self, problems: Sequence[Any]) -> Any:
        """The Coder's evaluator, knowing ``problems`` (added to it as modules arrive)."""
        if self._evaluator is None:
            from kz_core.evaluate import Evaluator

            self._evaluator = Evaluator(problems, self.config.eval, journal=self.journal)
        else:
            self._evaluator.problems.update({p.name: p for p in problems})
        return self._evaluator

    def close(self) -> None:
        for name in ("_validator", "_evaluator", "_pool"):
            resource = getattr(self, name)
            if resource is not None:
                resource.close()
                setattr(self, name, None)

    # -- the stages ---------------------------------------------------------------------

    def validate(self, completions: Sequence[Any], api_sets: Sequence[tuple[str, ...]], batch: int) -> list[Any]:
        """Parse and validate the completions; every module is added to the pool, and the
        results carry the names they are stored under."""
        import attrs

        modules = []
        for index, (completion, apis) in enumerate(zip(completions, api_sets)):
            modules.append((f"b{batch:05d}_{index:03d}", extract_code(completion_text(completion)), apis))
        validations = self.validator().validate(modules, self.pool(), batch_duplicates=False)
        pool = self.pool()
        if pool is None:
            return validations
        checkpoint = f"training call {batch}"
        return [attrs.evolve(v, name=pool.add(v, round=batch, checkpoint=checkpoint)) for v in validations]

    def coder_results(self, valid: Sequence[Any]) -> dict[str, list[EvalResult]]:
        """``proposer.coder_samples`` evaluated Coder samples per valid module, by name."""
        from kz_core.generate import evaluate_samples, sample_candidates
        from kz_core.plugins import get_plugin_manager

        if not valid or self.config.proposer.coder_samples < 1:
            return {}
        problems = [v.problem for v in valid]
        samples = sample_candidates(problems, self.config.proposer.coder_samples, self.config.eval.backend, self.config.policy, get_plugin_manager())
        results = evaluate_samples(samples, self.evaluator(problems))
        grouped: dict[str, list[EvalResult]] = {p.name: [] for p in problems}
        for sample, result in zip(samples, results):
            grouped[sample.problem].append(result)
        pool = self.pool()
        if pool is not None:
            for name, group in grouped.items():
                pool.record(name, group, self.config.reward.speed_baseline)
        return grouped

    def shape(self, validations: Sequence[Any], results: dict[str, list[EvalResult]]) -> list[float]:
        """One reward per module: ``shape_rewards`` (role proposer), then the repetition penalty."""
        from kz_core.plugins import get_plugin_manager
        from kz_core.proposer.reward import invalid_module_result
        from kz_core.proposer.similarity import fingerprint, similarity

        pm = get_plugin_manager()
        rewards = []
        for validation in validations:
            group = results.get(validation.name, []) if validation.valid else [invalid_module_result(validation.name, validation.findings)]
            shaped = pm.hook.shape_rewards(role="proposer", results=group, config=self.config.proposer)
            if not shaped:
                raise RewardUnavailableError(f"no installed plugin shapes Proposer rewards for proposer.reward={self.config.proposer.reward!r}")
            rewards.append(float(shaped[0]))
        prints = [fingerprint(v.code) if v.code else None for v in validations]
        self.last_repetition = [0.0] * len(validations)
        for i, validation in enumerate(validations):
            if not validation.valid:
                continue
            closest = max((similarity(prints[i], prints[j]) for j in range(len(prints)) if j != i), default=0.0)
            self.last_repetition[i] = closest
            rewards[i] -= self.config.proposer.repetition_penalty * closest
        return rewards

    def rewards(self, completions: Sequence[Any], apis: Sequence[str], batch: int) -> tuple[list[float], list[Any], dict[str, list[EvalResult]]]:
        api_sets = [tuple(a for a in str(entry).split(API_SEPARATOR) if a) for entry in apis]
        validations = self.validate(completions, api_sets, batch)
        results = self.coder_results([v for v in validations if v.valid])
        return self.shape(validations, results), validations, results

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], apis: Sequence[str], **kwargs: Any) -> list[float]:
        started = time.perf_counter()
        self.calls += 1
        # Validation and evaluation block on worker processes; a thread keeps TRL's event loop free.
        rewards, validations, results = await asyncio.to_thread(self.rewards, completions, apis, self.calls)
        self._record(rewards, validations, results, time.perf_counter() - started, kwargs)
        return rewards

    def _record(self, rewards: list[float], validations: list[Any], results: dict[str, list[EvalResult]], waited: float, kwargs: dict[str, Any]) -> None:
        coder = [r for group in results.values() for r in group]
        state = kwargs.get("trainer_state")
        entry = {
            "step": getattr(state, "global_step", len(self.step_log)),
            "reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
            "valid_share": sum(v.valid for v in validations) / len(validations) if validations else 0.0,
            "invalid_by_reason": dict(Counter(v.reason for v in validations if not v.valid)),
            "coder_correct_rate": sum(r.correct for r in coder) / len(coder) if coder else None,
            "repetition_mean": sum(self.last_repetition) / len(self.last_repetition) if self.last_repetition else 0.0,
            "reward_wait_s": waited,
        }
        self.step_log.append(entry)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            for key in ("valid_share", "repetition_mean", "reward_wait_s"):
                log_metric(f"kz/{key}", float(entry[key]))
