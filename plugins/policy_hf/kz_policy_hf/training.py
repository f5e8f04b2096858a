"""Coder training with TRL's GRPOTrainer and rewards from the sandboxed evaluator.

Problems become a prompt dataset (the Coder prompts of ``kz_core.prompts``, one row per
problem, with its name as a column the reward function reads). The reward function is
:class:`kz_policy_hf.rewards.CoderReward`: evaluator results shaped by the
``shape_rewards`` hook (CA-GRPO by default). TRL's option names pass straight through
(``train.num_generations``, ``loss_type``, ``beta``, ``epsilon``, ``scale_rewards``, and any
other through ``train.extra``); LoRA through peft is an option. Checkpoints go to
``<run dir>/checkpoints`` every ``train.save_steps`` steps, and a re-run of the same run
resumes from the last one. Every step appends one line to ``<run dir>/metrics.jsonl``:
loss, reward, correctness rate, CA-GRPO gate state, verdict counts and the share of the
step's time spent waiting for rewards.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from loguru import logger

from kz_core.model import Problem
from kz_core.prompts import coder_prompt

from kz_policy_hf.errors import PolicyError
from kz_policy_hf.loading import model_source, resolve_device
from kz_policy_hf.rewards import CoderReward


def prompt_dataset(problems: list[Problem], config: Any) -> Any:
    """One conversational prompt per problem, with the problem's name as a column."""
    from datasets import Dataset

    rows = []
    for problem in problems:
        prompt = coder_prompt(problem, config.eval.backend, config.policy)
        rows.append({"prompt": [{"role": m.role, "content": m.content} for m in prompt.messages], "problem": problem.name})
    return Dataset.from_list(rows)


def grpo_config(config: Any, output_dir: Path, on_gpu: bool) -> Any:
    """TRL's GRPOConfig from the ``train`` and ``policy`` sections (TRL's names kept)."""
    from trl import GRPOConfig

    train = config.train
    if train.per_device_train_batch_size % train.num_generations:
        raise PolicyError(
            f"train.per_device_train_batch_size ({train.per_device_train_batch_size}) must be a multiple of "
            f"train.num_generations ({train.num_generations}): each prompt's group must fit in a batch"
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
        gradient_checkpointing=False,
        disable_tqdm=True,
    )
    options.update(dict(train.extra))
    try:
        return GRPOConfig(**options)
    except TypeError as exc:
        raise PolicyError(f"TRL's GRPOConfig refused an option: {exc}; check train.extra") from exc


def last_checkpoint(output_dir: Path) -> str | None:
    """The newest ``checkpoint-N`` folder in ``output_dir``, to resume from."""
    checkpoints = sorted(output_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else -1)
    return str(checkpoints[-1]) if checkpoints else None


def _metrics_callback(reward: CoderReward, path: Path) -> Any:
    from transformers import TrainerCallback

    class MetricsToJsonl(TrainerCallback):
        """One line per optimizer step: TRL's logs merged with the reward function's record."""

        def __init__(self) -> None:
            self.step_started = time.perf_counter()

        def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - TRL's signature
            self.step_started = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if not logs or "loss" not in logs:
                return
            record = reward.step_log[-1] if reward.step_log else {}
            step_s = max(time.perf_counter() - self.step_started, 1e-9)
            line = {
                "step": state.global_step,
                "loss": logs.get("loss"),
                "reward": logs.get("reward", record.get("reward_mean")),
                "correct_rate": record.get("correct_rate"),
                "gate_open_groups": record.get("gate_open_groups"),
                "groups": record.get("groups"),
                "verdicts": record.get("verdicts"),
                "reward_wait_s": record.get("reward_wait_s"),
                "reward_wait_share": min(1.0, record.get("reward_wait_s", 0.0) / step_s),
                "speed_measured": record.get("speed_measured"),
                "step_s": step_s,
            }
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
            logger.info(
                "step {} loss {:.4f} reward {:.3f} correct {:.0%} gate open {}/{} waiting for rewards {:.0%}{}",
                line["step"], line["loss"] or 0.0, line["reward"] or 0.0, line["correct_rate"] or 0.0,
                line["gate_open_groups"], line["groups"], line["reward_wait_share"],
                "" if line["speed_measured"] else " (speed not measured: the speed term is 0)",
            )

    return MetricsToJsonl()


def train_coder(problems: list[Problem], config: Any, run_dir: Path, journal: Any = None) -> dict[str, Any]:
    """Train the Coder with GRPO on ``problems``; returns a summary of the run.

    :raises PolicyError: a bad option, or a model that cannot be loaded.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    if not problems:
        raise PolicyError("no training problems: select some with --problems / problems.*")
    device = resolve_device(config.policy.device)
    on_gpu = device.type == "cuda"
    source = model_source(config.policy, "coder")
    try:
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=Path(source).is_dir())
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=Path(source).is_dir())
    except OSError as exc:
        raise PolicyError(f"cannot load the policy model {source!r} for training: {exc}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    peft_config = None
    if config.train.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=config.train.lora_r, lora_alpha=config.train.lora_alpha, task_type="CAUSAL_LM")
    output_dir = run_dir / "checkpoints"
    reward = CoderReward(problems, config, journal)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=grpo_config(config, output_dir, on_gpu),
        train_dataset=prompt_dataset(problems, config),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[_metrics_callback(reward, run_dir / "metrics.jsonl")],
    )
    resume = last_checkpoint(output_dir)
    if resume:
        logger.info("resuming from {}", resume)
    started = time.perf_counter()
    try:
        trainer.train(resume_from_checkpoint=resume)
    finally:
        reward.close()
    trainer.save_model(str(run_dir / "final"))
    return {
        "steps": trainer.state.global_step,
        "seconds": time.perf_counter() - started,
        "resumed_from": resume,
        "final_model": str(run_dir / "final"),
        "reward_wait_s": sum(entry["reward_wait_s"] for entry in reward.step_log),
    }
