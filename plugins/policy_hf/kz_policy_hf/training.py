"""Coder and Proposer training with TRL's GRPOTrainer and rewards from sandboxed workers.

Coder: problems become a prompt dataset (the Coder prompts of ``kz_core.prompts``, one row
per problem, with its name as a column the reward function reads). The reward function is
:class:`kz_core.rewards.CoderReward`: evaluator results shaped by the
``shape_rewards`` hook (CA-GRPO by default).

Proposer: API sets drawn with the Coder's frontier (``kz_core.frontier.sample_api_sets``
with the pool's statistics) become Proposer prompts, one row per set, with the set as the
``apis`` column. The reward function is
:class:`kz_core.rewards.ProposerReward`: validation, the Coder's samples on
valid modules, learnability through ``shape_rewards``, minus a repetition penalty; every
module goes to the run's pool (``pool.sqlite``).

TRL's option names pass straight through (``train.num_generations``, ``loss_type``,
``beta``, ``epsilon``, ``scale_rewards``, and any other through ``train.extra``); LoRA
through peft is an option. Checkpoints go to ``<run dir>/checkpoints`` every
``train.save_steps`` steps, and a re-run of the same run resumes from the last one. Every
step appends one line to ``<run dir>/metrics.jsonl``: for the Coder, loss, reward,
correctness rate, CA-GRPO gate state, verdict counts and the share of the step's time
spent waiting for rewards; for the Proposer, loss, reward, valid share, invalid modules
by reason, the Coder's correctness on valid modules and the waiting share.

The Coder also trains in several processes (``accelerate launch``): see
``kz_policy_hf/distributed.py`` for what each process does and owns; the Proposer trains in
one.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from loguru import logger

from kz_core import API_SEPARATOR, CoderReward, Problem, ProposerReward, coder_prompt, grpo_groups, proposer_prompt, replace_file

from kz_policy_hf.errors import PolicyError
from kz_policy_hf.loading import model_source


def prompt_dataset(problems: list[Problem], config: Any) -> Any:
    """One conversational prompt per problem, with the problem's name as a column."""
    from datasets import Dataset

    rows = []
    for problem in problems:
        prompt = coder_prompt(problem, config.eval.backend, config.policy)
        rows.append({"prompt": prompt.chat(), "problem": problem.name})
    return Dataset.from_list(rows)


def proposer_dataset(api_sets: list[tuple[str, ...]], config: Any) -> Any:
    """One conversational Proposer prompt per API set, with the set as the ``apis`` column."""
    from datasets import Dataset

    rows = []
    for apis in api_sets:
        prompt = proposer_prompt(list(apis), config.policy)
        rows.append({"prompt": prompt.chat(), "apis": API_SEPARATOR.join(apis)})
    return Dataset.from_list(rows)


def grpo_config(config: Any, output_dir: Path, on_gpu: bool) -> Any:
    """TRL's GRPOConfig from the ``train`` and ``policy`` sections (TRL's names kept)."""
    from trl import GRPOConfig

    train = config.train
    if train.per_device_train_batch_size % train.num_generations:
        raise PolicyError(
            f"train.per_device_train_batch_size ({train.per_device_train_batch_size}) must be a multiple of "
            f"train.num_generations ({train.num_generations}): each prompt's group of completions must be "
            "in one batch of one process, where its rewards are shaped together"
        )
    options = dict(
        output_dir=str(output_dir),
        max_steps=train.max_steps,
        num_generations=train.num_generations,
        per_device_train_batch_size=train.per_device_train_batch_size,
        gradient_accumulation_steps=train.gradient_accumulation_steps,
        learning_rate=train.learning_rate,
        beta=train.beta,
        epsilon=train.epsilon,
        loss_type=train.loss_type,
        scale_rewards=train.scale_rewards,
        max_completion_length=train.max_completion_length,
        temperature=config.policy.temperature,
        top_p=config.policy.top_p,
        save_steps=train.save_steps,
        logging_steps=1,
        report_to="none",
        seed=config.run.seed,
        use_cpu=not on_gpu,
        bf16=on_gpu,
        disable_tqdm=True,
        # Several processes (DDP): every parameter takes part in each step; looking for unused
        # ones costs a pass over the graph per step (train.extra can turn it back on).
        ddp_find_unused_parameters=False,
    )
    # Off: a 135M model does not need it. transformers 5.2x renamed the argument and warns
    # about the old name; older versions know only the old one.
    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    options["activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"] = False
    options.update(dict(train.extra))
    try:
        return GRPOConfig(**options)
    except TypeError as exc:
        raise PolicyError(f"TRL's GRPOConfig refused an option: {exc}; check train.extra") from exc
    except ValueError as exc:  # TRL's own rules, e.g. generation_batch_size against the processes' batches
        raise PolicyError(f"TRL's GRPOConfig refused the train.* settings: {exc}") from exc


def fill_generation_batch(args: Any, dataset: Any, what: str) -> Any:
    """The dataset, its rows repeated in turn until it fills one generation batch.

    A generation batch takes ``generation_batch_size / num_generations`` different prompts
    (``per_device_train_batch_size`` x processes x ``steps_per_generation``, one prompt per
    group), and TRL drops a last, incomplete batch of prompts: with fewer rows (a
    co-evolution round whose frontier holds fewer modules, a short problem list) it would
    train no step at all and say nothing. Each repeated row is a group of its own.

    :param args: the GRPOConfig (it knows the number of processes).
    :param what: what a row is, for the log line ("training problems").
    """
    needed = args.generation_batch_size // args.num_generations
    if 0 < len(dataset) < needed:
        logger.info("{} {} for a generation batch of {} prompts: each is used {} times in turn", len(dataset), what, needed, -(-needed // len(dataset)))
        dataset = dataset.select([i % len(dataset) for i in range(needed)])
    return dataset


def last_checkpoint(output_dir: Path) -> str | None:
    """The newest complete ``checkpoint-N`` folder in ``output_dir``, to resume from.

    The Trainer writes a checkpoint's ``trainer_state.json`` after its weights, optimizer
    and random states: a folder without it is one whose writing was cut (a time limit, a
    lost machine), and resuming from it would fail; the one before it is taken instead."""
    numbered = [p for p in output_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    complete = [p for p in numbered if (p / "trainer_state.json").is_file()]
    checkpoints = sorted(complete, key=lambda p: int(p.name.split("-")[-1]))
    return str(checkpoints[-1]) if checkpoints else None


def _coder_line(record: dict[str, Any]) -> tuple[dict[str, Any], str]:
    line = {
        "correct_rate": record.get("correct_rate"),
        "gate_open_groups": record.get("gate_open_groups"),
        "groups": record.get("groups"),
        "signal_groups": record.get("signal_groups"),
        # The share of groups GRPO learns from (their rewards differ), None before any.
        "signal_share": record["signal_groups"] / record["groups"] if record.get("groups") and record.get("signal_groups") is not None else None,
        "verdicts": record.get("verdicts"),
        "speed_measured": record.get("speed_measured"),
        "speedup_geomean": record.get("speedup_geomean"),
        "fast_1": record.get("fast_1"),
    }
    speed = line["speedup_geomean"]
    message = "correct {:.0%} gate open {}/{} learning from {}/{}{}".format(
        line["correct_rate"] or 0.0, line["gate_open_groups"], line["groups"], line["signal_groups"], line["groups"],
        f" speedup {speed:.2f}x (geometric mean of the correct)" if speed else "" if line["speed_measured"] else " (speed not measured: the speed term is 0)",
    )
    return line, message


def _proposer_line(record: dict[str, Any]) -> tuple[dict[str, Any], str]:
    line = {
        "valid_share": record.get("valid_share"),
        "invalid_by_reason": record.get("invalid_by_reason"),
        "coder_correct_rate": record.get("coder_correct_rate"),
        "repetition_mean": record.get("repetition_mean"),
    }
    reasons = ", ".join(f"{reason} {count}" for reason, count in (line["invalid_by_reason"] or {}).items()) or "none"
    rate = line["coder_correct_rate"]
    message = "valid {:.0%} (invalid: {}) Coder correct on valid modules {}".format(
        line["valid_share"] or 0.0, reasons, "-" if rate is None else f"{rate:.0%}"
    )
    return line, message


def _metrics_callback(reward: Any, path: Path, describe: Any = _coder_line, merge: Any = None) -> Any:
    """The callback that writes ``metrics.jsonl``; ``merge`` makes one step record of the
    records of several processes (``CoderReward.merge_step_records``)."""
    from transformers import TrainerCallback

    from kz_policy_hf.distributed import gather

    class MetricsToJsonl(TrainerCallback):
        """One line per optimizer step: TRL's logs (already over every process) with the
        reward function's record; with several processes, every process's record of the
        step merged, and the line written by process 0 alone."""

        def __init__(self) -> None:
            self.step_started = time.perf_counter()

        def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - TRL's signature
            self.step_started = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if not logs or "loss" not in logs:
                return
            record = reward.step_log[-1] if reward.step_log else {}
            step_s = max(time.perf_counter() - self.step_started, 1e-9)
            if args.world_size > 1:  # every process logs each step: all of them get here
                record = merge(gather(record, args.world_size))
                if not state.is_world_process_zero:
                    return
            fields, message = describe(record)
            line = {
                "step": state.global_step,
                "loss": logs.get("loss"),
                "reward": logs.get("reward", record.get("reward_mean")),
                **fields,
                "reward_wait_s": record.get("reward_wait_s"),
                "reward_wait_share": min(1.0, record.get("reward_wait_s", 0.0) / step_s),
                "step_s": step_s,
            }
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
            logger.info(
                "step {} loss {:.4f} reward {:.3f} {} waiting for rewards {:.0%}",
                line["step"], line["loss"] or 0.0, line["reward"] or 0.0, message, line["reward_wait_share"],
            )

    return MetricsToJsonl()


def quiet_trainer(trainer: Any) -> None:
    """Without its progress bar (``disable_tqdm``), transformers' Trainer prints every log
    record as a raw dict ({'loss': '0', 'grad_norm': '0', ...}); kz's own callback already
    reports each step as one line, so that printer goes, and so do the libraries' notices of
    their own renamed internals (FutureWarning from inside transformers and TRL)."""
    import warnings

    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for callback in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(callback)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|trl)(\.|$)")


def _load_for_training(config: Any, role: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = model_source(config.policy, role)
    try:
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=Path(source).is_dir())
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=Path(source).is_dir())
    except OSError as exc:
        raise PolicyError(f"cannot load the policy model {source!r} for training: {exc}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def save_final(trainer: Any, tokenizer: Any, run_dir: Path, lora: bool) -> str:
    """Save the trained model as a plain checkpoint in ``<run_dir>/final`` (LoRA adapters
    merged in, so that every later command loads it like any model) and, with LoRA, the
    adapters alone in ``<run_dir>/adapter`` (a few MB). Returns the adapter folder or "".

    With several processes every process calls it and process 0 alone writes
    (``trainer.save_model`` decides that itself); it returns when the files are there."""
    if lora:
        trainer.save_model(str(run_dir / "adapter"))
        merged = trainer.model.merge_and_unload()
        if trainer.accelerator.is_main_process:
            merged.save_pretrained(str(run_dir / "final"))
            tokenizer.save_pretrained(str(run_dir / "final"))
    else:
        trainer.save_model(str(run_dir / "final"))  # the model and its tokenizer
    trainer.accelerator.wait_for_everyone()
    return str(run_dir / "adapter") if lora else ""


def drop_metrics_after(path: Path, step: int) -> int:
    """Remove the lines of steps after ``step`` from a metrics file: a run resumed from the
    checkpoint of ``step`` trains those steps again and logs them anew. Returns how many
    lines went (a line cut off by a crash goes too)."""
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if int(json.loads(line)["step"]) <= step:
                kept.append(line)
                continue
        except (ValueError, KeyError, TypeError):
            pass
        dropped += 1
    if dropped:
        replace_file(path, "".join(line + "\n" for line in kept))
        logger.info("{}: dropped {} lines of steps after {} (they are trained again)", path.name, dropped, step)
    return dropped


#: What a dataset row is, per role, for messages.
_PROMPTS = {"coder": "training problems", "proposer": "API sets"}


def _train(config: Any, run_dir: Path, role: str, reward: Any, dataset: Any, describe: Any, merge: Any = None) -> dict[str, Any]:
    """GRPO steps for ``role`` with ``reward`` on ``dataset``; resumes; saves ``final/``.
    ``merge`` makes one step record of several processes' (see ``_metrics_callback``)."""
    from trl import GRPOTrainer

    from kz_policy_hf.distributed import gather, trains_on_gpu

    output_dir = run_dir / "checkpoints"
    args = grpo_config(config, output_dir, trains_on_gpu(config))
    dataset = fill_generation_batch(args, dataset, _PROMPTS[role])
    model, tokenizer = _load_for_training(config, role)
    peft_config = None
    if config.train.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=config.train.lora_r, lora_alpha=config.train.lora_alpha, task_type="CAUSAL_LM", target_modules="all-linear")
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[_metrics_callback(reward, run_dir / "metrics.jsonl", describe, merge)],
    )
    quiet_trainer(trainer)
    resume = last_checkpoint(output_dir)
    if resume:
        logger.info("resuming from {}", resume)
        if trainer.accelerator.is_main_process:
            drop_metrics_after(run_dir / "metrics.jsonl", int(Path(resume).name.split("-")[-1]))
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=resume)
    finally:
        reward.close()
    adapter = save_final(trainer, tokenizer, run_dir, bool(config.train.lora))
    # The processes wait for their rewards side by side: the run waited as long as the slowest.
    waited = gather(sum(entry["reward_wait_s"] for entry in reward.step_log), args.world_size)
    return {
        "steps": trainer.state.global_step,
        "seconds": time.perf_counter() - started,
        "resumed_from": resume,
        "final_model": str(run_dir / "final"),
        "adapter": adapter,
        "reward_wait_s": max(waited),
    }


def train_coder(problems: list[Problem], config: Any, run_dir: Path, journal: Any = None) -> dict[str, Any]:
    """Train the Coder with GRPO on ``problems``; returns a summary of the run.

    :raises PolicyError: a bad option, or a model that cannot be loaded.
    """
    if not problems:
        raise PolicyError("no training problems: select some with --problems / problems.*")
    reward = CoderReward(problems, config, journal)
    return _train(config, run_dir, "coder", reward, prompt_dataset(problems, config), _coder_line, CoderReward.merge_step_records)


def train_proposer(config: Any, run_dir: Path, journal: Any = None, api_sets: list[tuple[str, ...]] | None = None) -> dict[str, Any]:
    """Train the Proposer with GRPO (learnability rewards); returns a summary of the run.

    Every module written while training is added to ``<run dir>/pool.sqlite``.

    :param api_sets: the API sets to prompt with, one dataset row each (the co-evolution
        loop draws them from its own pool); None: drawn once, at the start, weighted by
        the frontier of the run's pool, as many as :func:`kz_core.config.grpo_groups` says.
    :raises PolicyError: a bad option, no API sets, a model that cannot be loaded, or
        several training processes.
    """
    import random

    from kz_core import POOL_FILE, ModulePool, api_catalog, sample_api_sets

    from kz_policy_hf.distributed import training_processes

    processes = training_processes(config).count
    if processes > 1:
        raise PolicyError(
            f"the Proposer trains in one process, not {processes}: the processes would name their modules "
            "alike in the run's pool, and each would sample the Coder on its own; run kz train proposer "
            "(and co-evolution) without accelerate launch"
        )

    pool_path = run_dir / POOL_FILE
    if api_sets is None:
        with ModulePool(pool_path) as pool:
            stats = pool.stats()
        proposer = config.proposer
        try:
            api_sets = sample_api_sets(api_catalog(), stats, grpo_groups(config.train), proposer.min_apis, proposer.max_apis, config.frontier, random.Random(config.run.seed))
        except ValueError as exc:
            raise PolicyError(f"cannot draw API sets: {exc}") from exc
    api_sets = [tuple(apis) for apis in api_sets if apis]
    if not api_sets:
        raise PolicyError("no API sets to prompt the Proposer with: each needs at least one API name")
    reward = ProposerReward(config, pool_path, journal)
    summary = _train(config, run_dir, "proposer", reward, proposer_dataset(api_sets, config), _proposer_line)
    with ModulePool(pool_path) as pool:
        summary.update(pool_size=len(pool), pool_valid=len(pool.entries(valid=True)))
    return summary
