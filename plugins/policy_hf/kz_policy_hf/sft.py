"""Supervised fine-tuning (``kz train sft``) with TRL's SFTTrainer: the warm start that
gives GRPO a model that already writes the format.

Rows are chat pairs (``prompt``: the system and user messages, exactly the prompts GRPO
uses; ``completion``: the assistant's answer) from ``kz data synth`` or from expert
iteration; the loss is on the completion only. LoRA (peft) or full fine-tuning.
Checkpoints go to ``<run dir>/checkpoints`` every ``sft.save_steps`` steps and a re-run
resumes from the last. The result, ``<run dir>/final``, is a complete model (LoRA
adapters merged in) that ``kz train coder``, ``kz train proposer`` and ``kz train`` start
from with ``policy.model=<run dir>/final``; with LoRA the adapters alone are also kept in
``<run dir>/adapter`` (a few MB). Every step appends its loss to ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from loguru import logger

from kz_policy_hf.errors import PolicyError
from kz_policy_hf.loading import resolve_device
from kz_policy_hf.training import _load_for_training, drop_metrics_after, last_checkpoint, quiet_trainer, save_final

ROLES = ("coder", "proposer", "both")


def sft_rows(path: str | Path, role: str, split: str = "", backends: list[str] | tuple[str, ...] = ()) -> Any:
    """The rows of a pairs file to train on, as a ``datasets.Dataset`` of ``prompt`` and
    ``completion``.

    :raises PolicyError: no such file, malformed rows, or no row left after the filters.
    """
    import datasets

    if role not in ROLES:
        raise PolicyError(f"sft.role={role!r}: use one of {', '.join(ROLES)}")
    path = Path(path)
    if not path.is_file():
        raise PolicyError(f"no pairs file at {path}: make one with `kz data synth` and pass --data (sft.data)")
    try:
        rows = datasets.load_dataset("json", data_files=str(path), split="train")
    except Exception as exc:  # noqa: BLE001 - datasets raises many kinds for a bad file
        raise PolicyError(f"{path} is not a JSONL of chat pairs: {exc}") from exc
    missing = {"prompt", "completion"} - set(rows.column_names)
    if missing:
        raise PolicyError(f"{path}: rows need {', '.join(sorted(missing))} (chat messages), as `kz data synth` writes them")

    def keep(row: dict[str, Any]) -> bool:
        if role != "both" and row.get("role", role) != role:
            return False
        if split and row.get("split", split) != split:
            return False
        return not (backends and row.get("role") == "coder" and row.get("backend") not in backends)

    kept = rows.filter(keep)
    if len(kept) == 0:
        raise PolicyError(f"{path}: no row of role {role!r}" + (f", split {split!r}" if split else "") + (f", backends {', '.join(backends)}" if backends else ""))
    return kept.select_columns(["prompt", "completion"])


def sft_config(config: Any, output_dir: Path, on_gpu: bool) -> Any:
    """TRL's SFTConfig from the ``sft`` section (TRL's names kept)."""
    from trl import SFTConfig

    sft = config.sft
    options = dict(
        output_dir=str(output_dir),
        num_train_epochs=sft.num_train_epochs,
        max_steps=sft.max_steps,
        per_device_train_batch_size=sft.per_device_train_batch_size,
        gradient_accumulation_steps=sft.gradient_accumulation_steps,
        learning_rate=sft.learning_rate,
        max_length=sft.max_length,
        completion_only_loss=True,
        save_steps=sft.save_steps,
        logging_steps=1,
        report_to="none",
        seed=config.run.seed,
        use_cpu=not on_gpu,
        bf16=on_gpu,
        disable_tqdm=True,
    )
    options.update(dict(sft.extra))
    try:
        return SFTConfig(**options)
    except (TypeError, ValueError) as exc:
        raise PolicyError(f"TRL's SFTConfig refused an option: {exc}; check sft.extra") from exc


def _loss_callback(path: Path) -> Any:
    from transformers import TrainerCallback

    class LossToJsonl(TrainerCallback):
        """One line per optimizer step: its loss, learning rate and seconds."""

        def __init__(self) -> None:
            self.started = time.perf_counter()

        def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - the Trainer's signature
            self.started = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            if not logs or "loss" not in logs:
                return
            line = {
                "step": state.global_step,
                "loss": logs.get("loss"),
                "learning_rate": logs.get("learning_rate"),
                "mean_token_accuracy": logs.get("mean_token_accuracy"),
                "step_s": time.perf_counter() - self.started,
            }
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
            logger.info("sft step {} loss {:.4f}", line["step"], line["loss"] or 0.0)

    return LossToJsonl()


def train_sft(config: Any, run_dir: Path, rows: Any = None, role: str = "") -> dict[str, Any]:
    """Fine-tune the policy on chat pairs; returns a summary of the run.

    :param rows: a ``datasets.Dataset`` of ``prompt`` and ``completion`` (expert
        iteration); None: read ``sft.data`` with the ``sft`` section's filters.
    :param role: whose model is fine-tuned (``coder`` or ``proposer``); empty: the one
        ``sft.role`` names (the Coder's for ``both``).
    :raises PolicyError: a bad option or file, or a model that cannot be loaded.
    """
    from trl import SFTTrainer

    sft = config.sft
    if rows is None:
        rows = sft_rows(sft.data, sft.role, sft.split, list(sft.backends))
    role = role or ("proposer" if sft.role == "proposer" else "coder")
    on_gpu = resolve_device(config.policy.device).type == "cuda"
    model, tokenizer = _load_for_training(config, role)
    peft_config = None
    if sft.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=sft.lora_r, lora_alpha=sft.lora_alpha, task_type="CAUSAL_LM", target_modules="all-linear")
    output_dir = run_dir / "checkpoints"
    trainer = SFTTrainer(
        model=model,
        args=sft_config(config, output_dir, on_gpu),
        train_dataset=rows,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[_loss_callback(run_dir / "metrics.jsonl")],
    )
    quiet_trainer(trainer)
    resume = last_checkpoint(output_dir)
    if resume:
        logger.info("resuming from {}", resume)
        drop_metrics_after(run_dir / "metrics.jsonl", int(Path(resume).name.split("-")[-1]))
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - started
    adapter = save_final(trainer, tokenizer, run_dir, bool(sft.lora))
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return {
        "steps": trainer.state.global_step,
        "rows": len(rows),
        "seconds": seconds,
        "resumed_from": resume,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "final_model": str(run_dir / "final"),
        "adapter": adapter,
    }
