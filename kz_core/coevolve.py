"""Co-evolution: the alternating training loop of ``kz train``, resumable at any point.

Before round 1 the pool (``<run>/pool.sqlite``) gets the problems of ``problems.*`` as
seed modules (``coevolve.seed_problems``; held-out problems are left out). Then each round
``r`` (1 .. ``coevolve.rounds``) runs six phases in order:

1. ``proposer``: Proposer GRPO for ``coevolve.proposer_steps`` steps (``train_policy``
   hook, role ``proposer``) on API sets drawn with the pool's frontier
   (``sample_api_sets``), in ``<run>/rounds/<r>/proposer``; its model becomes the
   Proposer's (``policy.proposer_model``), and the Coder's too with
   ``coevolve.shared_model``.
2. ``pool``: the Proposer writes ``coevolve.modules_per_round`` modules
   (:func:`kz_core.proposer.propose.propose_round`); every one is validated and added to
   the pool. Modules are decontaminated against the held-out source unless
   ``proposer.decontaminate`` names another.
3. ``frontier``: ``coevolve.coder_samples`` Coder samples for each valid pool module that
   has no Coder statistics yet, evaluated (journaled in ``<run>/journal.sqlite``) and
   recorded in the pool; then ``select_frontier`` picks ``coevolve.frontier_k`` modules
   (replay share included).
4. ``expert`` (when ``coevolve.expert_samples`` > 0): expert iteration: that many Coder
   samples per frontier module, evaluated; the correct ones become chat pairs and the
   Coder is fine-tuned on them (``train_policy``, role ``coder_sft``, the ``sft``
   section's options) in ``<run>/rounds/<r>/expert``; its model becomes the Coder's.
5. ``coder``: Coder GRPO for ``coevolve.coder_steps`` steps on those modules
   (``train_policy``, role ``coder``) in ``<run>/rounds/<r>/coder``; its model becomes the
   Coder's (``policy.model``).
6. ``heldout``: ``coevolve.heldout_samples`` samples per held-out problem
   (``coevolve.heldout_source`` / ``heldout_ids``) from the current Coder, evaluated; one
   line per round goes to ``<run>/rounds.jsonl`` (pool size, frontier coverage, pass@1,
   pass@k, fast_1 and geometric-mean speedups overall and per backend), which
   ``kz_core.report`` plots.

Resuming: ``<run>/coevolve_state.json`` (replaced atomically) records every finished
phase and the current model paths; a re-run skips finished phases; an interrupted
training phase resumes from its last checkpoint (the training plugin's promise); sampled
completions are kept in the phase's folder (``samples.jsonl``) and their evaluations come
back from the journal, so nothing finished is lost.

The loop calls hooks (``train_policy``, ``sample_completions``, ``select_frontier``,
``shape_rewards`` through the trainers) and never imports a plugin. It logs progress and
prints nothing; ``kz train`` prints the summary.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loguru import logger
from omegaconf import OmegaConf

from kz_core.config import grpo_groups
from kz_core.errors import KzError
from kz_core.model import Finding, Problem, Severity, TrainingSummary
from kz_core.paths import replace_file

#: The phases of one round, in order.
PHASES: tuple[str, ...] = ("proposer", "pool", "frontier", "expert", "coder", "heldout")
#: The state file in the run directory.
STATE_FILE = "coevolve_state.json"
#: One line per finished round (what ``kz report`` reads).
ROUNDS_FILE = "rounds.jsonl"
#: The model a role starts from when ``policy.model`` is empty (see the policy config).
EMBEDDED_MODEL = "embedded:smollm2"


class CoevolveError(KzError, RuntimeError):
    """A co-evolution run that cannot go on; the message says what to change."""


# ---------------------------------------------------------------------------------------
# State: finished phases and current models, in <run>/coevolve_state.json
# ---------------------------------------------------------------------------------------


def initial_models(config: Any) -> dict[str, str]:
    """The models the roles start from: ``policy.model``; the Proposer's own
    ``policy.proposer_model`` when set and the models are not shared."""
    coder = config.policy.model or EMBEDDED_MODEL
    proposer = coder if config.coevolve.shared_model else (config.policy.proposer_model or coder)
    return {"coder": coder, "proposer": proposer}


def initial_adapters(config: Any) -> dict[str, str]:
    """The LoRA adapters merged into the starting models (``policy.adapter``,
    ``policy.proposer_adapter``); a role's adapter is dropped once that role is trained,
    its checkpoint holding the merged weights."""
    coder = config.policy.adapter
    own = not config.coevolve.shared_model and bool(config.policy.proposer_model)
    return {"coder": coder, "proposer": config.policy.proposer_adapter if own else coder}


def load_state(run_dir: Path, config: Any) -> dict[str, Any]:
    """The run's state, or a fresh one (no finished phase, the configured models)."""
    path = Path(run_dir) / STATE_FILE
    if path.is_file():
        state = json.loads(path.read_text(encoding="utf-8"))
        state.setdefault("rounds", {})
        untrained = state.get("models") == initial_models(config)
        state.setdefault("adapters", initial_adapters(config) if untrained else {"coder": "", "proposer": ""})
        return state
    return {"version": 1, "seeded": False, "models": initial_models(config), "adapters": initial_adapters(config), "rounds": {}}


def save_state(run_dir: Path, state: dict[str, Any]) -> None:
    """Write the state atomically: a crash leaves the old file or the new one, never half."""
    replace_file(Path(run_dir) / STATE_FILE, json.dumps(state, indent=2, sort_keys=True))


def finished_phases(state: dict[str, Any], round_number: int) -> list[str]:
    """The phases of a round that finished, in order."""
    done = state["rounds"].get(str(round_number), {})
    return [phase for phase in PHASES if phase in done]


def read_rounds(run_dir: Path) -> list[dict[str, Any]]:
    """The lines of ``rounds.jsonl`` (a line cut off by a crash is skipped)."""
    path = Path(run_dir) / ROUNDS_FILE
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


# ---------------------------------------------------------------------------------------
# Sampling and evaluating, with completions kept for re-runs
# ---------------------------------------------------------------------------------------


def _sample_kept(path: Path, problems: Sequence[Problem], n: int, config: Any, pm: Any) -> list[Any]:
    """``n`` Coder samples per problem; those in ``path`` are reused, new ones appended."""
    from kz_core.generate import Sample, sample_candidates
    from kz_core.serialization import dumps, loads

    kept: dict[str, list[Sample]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                sample = loads(Sample, line)
            except (ValueError, TypeError):
                continue  # a line cut off by a crash
            kept.setdefault(sample.problem, []).append(sample)
    missing = [p for p in problems if len(kept.get(p.name, [])) < n]
    if missing:
        fresh = sample_candidates(missing, n, config.eval.backend, config.policy, pm)
        for problem in missing:
            kept[problem.name] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            for sample in fresh:
                kept[sample.problem].append(sample)
                handle.write(dumps(sample) + "\n")
    if len(missing) < len(problems):
        logger.info("{} of {} problems' samples reused from {}", len(problems) - len(missing), len(problems), path)
    return [sample for p in problems for sample in kept[p.name][-n:]]


def _evaluate(samples: Sequence[Any], problems: Sequence[Problem], config: Any, journal: Any, what: str) -> tuple[list[Any], int]:
    """Evaluate samples (journaled); returns the results and how many came from the journal."""
    from kz_core.evaluate import Evaluator
    from kz_core.generate import evaluate_samples, journaled_count

    with Evaluator(problems, config.eval, journal=journal) as evaluator:
        reused = journaled_count(samples, evaluator)
        logger.info("{}: evaluating {} samples ({} reused from the journal)", what, len(samples), reused)
        results = evaluate_samples(samples, evaluator)
    return results, reused


def _write_results(path: Path, results: Sequence[Any]) -> None:
    from kz_core.serialization import dumps

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dumps(r) + "\n" for r in results), encoding="utf-8")


# ---------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------


class Coevolution:
    """One co-evolution run in a run directory; :meth:`run` does every unfinished phase.

    :param config: the resolved kz config (``coevolve`` and every section it uses).
    :param run_dir: the run directory (``run.root``/``run.name``).
    :param pm: the plugin manager (None: the loaded one).
    """

    def __init__(self, config: Any, run_dir: Path, pm: Any = None):
        from kz_core.plugins import get_plugin_manager

        self.config = config
        self.run_dir = Path(run_dir)
        self.pm = pm or get_plugin_manager()
        self.state = load_state(self.run_dir, config)
        self.pool: Any = None
        self.journal: Any = None
        self.heldout: list[Problem] = []
        self._check()

    def _check(self) -> None:
        from kz_core.config import check_section

        check_section("coevolve", self.config.coevolve)  # the rules every config load applies

    # -- helpers --------------------------------------------------------------------------

    def round_dir(self, round_number: int, phase: str) -> Path:
        return self.run_dir / "rounds" / str(round_number) / phase

    def phase_config(self, steps: int | None = None, **sections: dict[str, Any]) -> Any:
        """The config with the current models (and ``train.max_steps`` when given)."""
        models, adapters = self.state["models"], self.state["adapters"]
        policy = {"model": models["coder"], "proposer_model": models["proposer"], "adapter": adapters["coder"], "proposer_adapter": adapters["proposer"]}
        layer: dict[str, Any] = {"policy": policy, **sections}
        if steps is not None:
            layer["train"] = {"max_steps": steps}
        return OmegaConf.merge(self.config, layer)

    def _train(self, role: str, items: Sequence[Any], steps: int, run_dir: Path) -> TrainingSummary:
        summary = self.pm.hook.train_policy(role=role, items=list(items), config=self.phase_config(steps), run_dir=run_dir)
        if summary is None:
            raise CoevolveError(
                f"no installed plugin trains policies with policy.sampler={self.config.policy.sampler!r}: "
                "install kz-policy-hf (sampler 'hf') or set policy.sampler"
            )
        return summary

    def _set_model(self, role: str, path: str) -> None:
        models, adapters = self.state["models"], self.state["adapters"]
        models[role], adapters[role] = path, ""  # a trained checkpoint holds its adapter's weights
        if self.config.coevolve.shared_model:
            models["coder"] = models["proposer"] = path
            adapters["coder"] = adapters["proposer"] = ""

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]]:
        """Every unfinished phase of every round; returns the lines of ``rounds.jsonl``."""
        from kz_core.evaluate.journal import Journal
        from kz_core.problems import load_problems
        from kz_core.proposer.pool import open_pool

        coevolve = self.config.coevolve
        self.heldout = list(load_problems(coevolve.heldout_source, ids=coevolve.heldout_ids).problems)
        if not self.heldout:
            raise CoevolveError(f"no held-out problems in {coevolve.heldout_source!r} with ids {coevolve.heldout_ids!r}: set coevolve.heldout_source / heldout_ids")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open_pool(self.run_dir) as self.pool, Journal(self.run_dir / "journal.sqlite") as self.journal:
            if coevolve.seed_problems and not self.state.get("seeded"):
                self.seed_pool()
            for round_number in range(1, coevolve.rounds + 1):
                done = self.state["rounds"].setdefault(str(round_number), {})
                for phase in PHASES:
                    if phase in done:
                        logger.info("round {}: {} already done, skipped", round_number, phase)
                        continue
                    logger.info("round {}/{}: {}", round_number, coevolve.rounds, phase)
                    started = time.perf_counter()
                    record = getattr(self, f"phase_{phase}")(round_number)
                    record["seconds"] = time.perf_counter() - started
                    record["finished"] = time.time()
                    done[phase] = record
                    save_state(self.run_dir, self.state)
                    logger.info("round {}: {} done in {:.0f} s", round_number, phase, record["seconds"])
        return read_rounds(self.run_dir)

    def seed_pool(self) -> None:
        """Add the problems of ``problems.*`` to the pool, held-out problems left out."""
        from kz_core.problems import load_problems_from_config
        from kz_core.proposer.validate import ModuleValidation

        source = self.config.problems.source
        heldout = {p.content_hash for p in self.heldout} | {p.name for p in self.heldout}
        added, left_out = 0, []
        for problem in load_problems_from_config(self.config.problems).problems:
            if problem.content_hash in heldout or problem.name in heldout:
                left_out.append(problem.name)
                continue
            if self.pool.get(problem.name) is None:
                note = Finding("seed", f"seed problem from {source}; added without validation", Severity.INFO)
                self.pool.add(ModuleValidation(problem.name, problem.code, (), True, (note,)), round=0, checkpoint=f"seed:{source}")
                added += 1
        if left_out:
            logger.info("seed problems held out, not trained on: {}", ", ".join(left_out))
        logger.info("pool seeded with {} problems from {}", added, source)
        self.state["seeded"] = True
        save_state(self.run_dir, self.state)

    # -- the phases (each returns the record kept in the state file) -------------------------

    def phase_proposer(self, round_number: int) -> dict[str, Any]:
        from kz_core.frontier import sample_api_sets
        from kz_core.proposer.catalog import api_catalog

        config, steps = self.config, self.config.coevolve.proposer_steps
        if steps == 0:
            return {"skipped": "coevolve.proposer_steps is 0"}
        count = grpo_groups(config.train, steps)
        rng = random.Random(f"{config.run.seed}:coevolve:{round_number}:proposer")
        api_sets = sample_api_sets(api_catalog(), self.pool.stats(), count, config.proposer.min_apis, config.proposer.max_apis, config.frontier, rng)
        summary = self._train("proposer", api_sets, steps, self.round_dir(round_number, "proposer"))
        self._set_model("proposer", summary.model_path)
        logger.info("Proposer trained {} steps in {:.0f} s: {}", summary.steps, summary.seconds, summary.model_path)
        return {"steps": summary.steps, "model_path": summary.model_path, "reward_wait_s": summary.reward_wait_s, "api_sets": len(api_sets)}

    def phase_pool(self, round_number: int) -> dict[str, Any]:
        from kz_core.proposer.propose import propose_round

        count = self.config.coevolve.modules_per_round
        if count == 0:
            return {"skipped": "coevolve.modules_per_round is 0"}
        already = [e for e in self.pool.entries() if e.round == round_number and not e.checkpoint.startswith("seed:")]
        if already:  # an interrupted run added them before it could record the phase
            logger.info("round {}: {} proposed modules already in the pool", round_number, len(already))
            return {"proposed": len(already), "valid": sum(e.valid for e in already)}
        decontaminate = self.config.proposer.decontaminate or self.config.coevolve.heldout_source
        config = self.phase_config(proposer={"decontaminate": decontaminate})
        validations, summary = propose_round(count, config, self.pool, self.pm, round_number=round_number)
        logger.info(
            "{} of {} proposed modules valid{}; pool: {} valid of {}",
            summary.valid, summary.proposed,
            "" if not summary.invalid_by_reason else " (invalid: " + ", ".join(f"{k} {v}" for k, v in summary.invalid_by_reason.items()) + ")",
            summary.pool_valid, summary.pool_size,
        )
        return {"proposed": summary.proposed, "valid": summary.valid, "invalid_by_reason": summary.invalid_by_reason}

    def phase_frontier(self, round_number: int) -> dict[str, Any]:
        config = self.phase_config()
        coevolve = config.coevolve
        todo = [e.problem for e in self.pool.entries(valid=True) if e.samples == 0]
        evaluated = reused = 0
        if todo and coevolve.coder_samples > 0:
            folder = self.round_dir(round_number, "frontier")
            samples = _sample_kept(folder / "samples.jsonl", todo, coevolve.coder_samples, config, self.pm)
            results, reused = _evaluate(samples, todo, config, self.journal, f"round {round_number} frontier statistics")
            _write_results(folder / "results.jsonl", results)
            grouped: dict[str, list[Any]] = {}
            for result in results:
                grouped.setdefault(result.problem, []).append(result)
            for name, group in grouped.items():
                self.pool.record(name, group, config.reward.speed_baseline)
            evaluated = len(results)
        selection = self.pm.hook.select_frontier(stats=self.pool.stats(), k=coevolve.frontier_k, config=config.frontier)
        if selection is None:
            raise CoevolveError(f"no installed plugin selects a frontier for frontier.name={config.frontier.name!r}: use the core's 'beta'")
        logger.info("frontier: {}", ", ".join(f"{m} ({selection.scores.get(m, 0):.2f})" for m in selection.modules) or "empty")
        return {"modules": list(selection.modules), "scores": dict(selection.scores), "evaluated": evaluated, "reused": reused, **self.frontier_coverage()}

    def phase_expert(self, round_number: int) -> dict[str, Any]:
        """Expert iteration (``coevolve.expert_samples``): sample the Coder on the frontier
        modules, keep the completions the evaluator judges correct, fine-tune on them."""
        from kz_core.prompts import coder_prompt

        config = self.phase_config()
        n = config.coevolve.expert_samples
        names = self.state["rounds"][str(round_number)]["frontier"]["modules"]
        problems = [entry.problem for name in names if (entry := self.pool.get(name)) is not None]
        if n == 0 or not problems:
            return {"skipped": "coevolve.expert_samples is 0" if n == 0 else "no modules on the frontier"}
        folder = self.round_dir(round_number, "expert")
        samples = _sample_kept(folder / "samples.jsonl", problems, n, config, self.pm)
        results, reused = _evaluate(samples, problems, config, self.journal, f"round {round_number} expert iteration")
        _write_results(folder / "results.jsonl", results)
        by_problem = {p.name: p for p in problems}
        rows = []
        for sample, result in zip(samples, results):
            if result.correct:
                prompt = coder_prompt(by_problem[sample.problem], sample.backend, config.policy)
                rows.append({"prompt": prompt.chat(), "completion": [{"role": "assistant", "content": sample.text}]})
        record = {"samples": len(samples), "correct": len(rows), "reused": reused}
        if not rows:
            logger.warning("round {}: expert iteration kept no sample (none correct): the Coder is not fine-tuned", round_number)
            return {**record, "skipped": "no correct sample"}
        summary = self._train("coder_sft", rows, None, folder / "sft")
        self._set_model("coder", summary.model_path)
        logger.info("expert iteration: fine-tuned on {} correct samples of {} in {:.0f} s: {}", len(rows), len(samples), summary.seconds, summary.model_path)
        return {**record, "steps": summary.steps, "model_path": summary.model_path}

    def phase_coder(self, round_number: int) -> dict[str, Any]:
        steps = self.config.coevolve.coder_steps
        names = self.state["rounds"][str(round_number)]["frontier"]["modules"]
        problems = [entry.problem for name in names if (entry := self.pool.get(name)) is not None]
        if steps == 0 or not problems:
            reason = "coevolve.coder_steps is 0" if steps == 0 else "no modules on the frontier"
            logger.warning("round {}: the Coder is not trained: {}", round_number, reason)
            return {"skipped": reason}
        summary = self._train("coder", problems, steps, self.round_dir(round_number, "coder"))
        self._set_model("coder", summary.model_path)
        logger.info("Coder trained {} steps in {:.0f} s: {}", summary.steps, summary.seconds, summary.model_path)
        return {"steps": summary.steps, "model_path": summary.model_path, "reward_wait_s": summary.reward_wait_s, "problems": [p.name for p in problems]}

    def phase_heldout(self, round_number: int) -> dict[str, Any]:
        config = self.phase_config()
        n = config.coevolve.heldout_samples
        folder = self.round_dir(round_number, "heldout")
        samples = _sample_kept(folder / "samples.jsonl", self.heldout, n, config, self.pm)
        results, reused = _evaluate(samples, self.heldout, config, self.journal, f"round {round_number} held-out")
        _write_results(folder / "results.jsonl", results)
        heldout = heldout_metrics(results, n)
        heldout["by_backend"] = {
            backend: heldout_metrics([r for r in results if r.backend == backend], n) for backend in sorted({r.backend for r in results})
        }
        frontier = self.state["rounds"][str(round_number)].get("frontier", {})
        line = {
            "round": round_number,
            "pool_size": len(self.pool),
            "pool_valid": len(self.pool.entries(valid=True)),
            "frontier": {
                "api_coverage": frontier.get("api_coverage", 0.0),
                "intermediate_share": frontier.get("intermediate_share", 0.0),
                "modules": frontier.get("modules", []),
            },
            "heldout": heldout,
            "heldout_samples": {"problems": len(self.heldout), "per_problem": n, "results": len(results), "reused": reused},
            "models": dict(self.state["models"]),
            "seconds": {phase: record.get("seconds") for phase, record in self.state["rounds"][str(round_number)].items()},
        }
        if not any(row.get("round") == round_number for row in read_rounds(self.run_dir)):
            with (self.run_dir / ROUNDS_FILE).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
        logger.info(
            "round {} held-out: {} of {} samples correct; pass@1 {}, pass@{} {}",
            round_number, sum(r.correct for r in results), len(results), _fraction(heldout["pass@1"]), n, _fraction(heldout["pass@k"]),
        )
        return {"reused": reused, "results": len(results), "heldout": heldout}

    def frontier_coverage(self) -> dict[str, float]:
        """Share of the API catalog in valid modules; share of sampled valid modules with
        a pass rate strictly between 0 and 1."""
        from kz_core.proposer.catalog import api_catalog

        stats = self.pool.stats()
        catalog = api_catalog()
        covered = {api for s in stats for api in s.apis if api in catalog}
        sampled = [s for s in stats if s.samples]
        return {
            "api_coverage": len(covered) / len(catalog) if catalog else 0.0,
            "intermediate_share": sum(0 < s.correct < s.samples for s in sampled) / len(sampled) if sampled else 0.0,
        }


def heldout_metrics(results: Sequence[Any], n: int) -> dict[str, Any]:
    """pass@1, pass@k (k = ``n``), fast_1 and geometric-mean speedups against eager and
    compile (None: not measured, as on a CPU) of held-out results."""
    from kz_core.metrics import summarize

    summary = summarize(results, ks=sorted({1, n}))
    values = {entry.k: entry.value for entry in summary.pass_at_k}
    return {
        "pass@1": values.get(1),
        "pass@k": values.get(n),
        "correct_rate": summary.pass_rate,
        "fast_1_eager": summary.fast_1_eager,
        "fast_1_compile": summary.fast_1_compile,
        "speedup_eager": summary.speedup_eager,
        "speedup_compile": summary.speedup_compile,
    }


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run_coevolution(config: Any, run_dir: Path, pm: Any = None) -> list[dict[str, Any]]:
    """Run (or resume) co-evolution in ``run_dir``; returns the lines of ``rounds.jsonl``.

    :raises CoevolveError: a setting that cannot work, or no plugin for a needed hook.
    """
    return Coevolution(config, run_dir, pm).run()
