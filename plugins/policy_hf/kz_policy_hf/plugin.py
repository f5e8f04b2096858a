"""The kz hook implementations of kz-policy-hf (entry point ``policy_hf``).

Only the hook functions live here; they answer when the config names this plugin's sampler
(``policy.sampler: hf``, or ``vllm`` where vLLM is installed) and delegate to
:mod:`kz_policy_hf.sampling` or :mod:`kz_policy_hf.vllm_sampler` for sampling, and to
:mod:`kz_policy_hf.training` (TRL's GRPOTrainer) for training. This module must not
import torch or transformers at import time: ``kz`` loads every plugin at start-up, and a
command that samples nothing must not pay for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kz_core import hookimpl

if TYPE_CHECKING:
    from kz_core import Completion, KzConfig, PolicyConfig, Prompt, TrainingSummary

#: The ``policy.sampler`` values this plugin answers to.
SAMPLER_NAME = "hf"
VLLM_SAMPLER_NAME = "vllm"


@hookimpl
def sample_completions(
    prompts: Sequence[Prompt], n: int, role: str, config: PolicyConfig
) -> list[list[Completion]] | None:
    """Sample with transformers ``generate`` (``hf``) or vLLM (``vllm``); else None."""
    if config.sampler == VLLM_SAMPLER_NAME:
        from kz_policy_hf.vllm_sampler import sample_completions as sample_with_vllm

        return sample_with_vllm(prompts, n, role, config)
    if config.sampler != SAMPLER_NAME:
        return None
    from kz_policy_hf.sampling import sample_completions as sample

    return sample(prompts, n, role, config)


@hookimpl
def train_policy(role: str, items: Sequence[Any], config: KzConfig, run_dir: Path) -> TrainingSummary | None:
    """GRPO with TRL for the Coder (``train_coder``) or the Proposer (``train_proposer``).

    Answers for this plugin's samplers (``hf``, ``vllm``); training always uses TRL.
    Evaluation results go to ``<run_dir>/journal.sqlite``; the Proposer's modules to
    ``<run_dir>/pool.sqlite``.
    """
    if config.policy.sampler not in (SAMPLER_NAME, VLLM_SAMPLER_NAME):
        return None
    from kz_core import Journal, TrainingSummary

    from kz_policy_hf.errors import PolicyError
    from kz_policy_hf.training import train_coder, train_proposer

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with Journal(run_dir / "journal.sqlite") as journal:
        if role == "coder":
            summary = train_coder(list(items), config, run_dir, journal)
        elif role == "proposer":
            summary = train_proposer(config, run_dir, journal, api_sets=[tuple(apis) for apis in items])
        elif role == "coder_sft":
            from datasets import Dataset

            from kz_policy_hf.sft import train_sft

            # The Coder's model, whatever sft.role says (it selects rows for kz train sft).
            summary = train_sft(config, run_dir, Dataset.from_list([{"prompt": row["prompt"], "completion": row["completion"]} for row in items]), role="coder")
            summary["reward_wait_s"] = 0.0
            role = "coder"
        else:
            raise PolicyError(f"unknown policy role {role!r}: train coder, proposer or coder_sft")
    return TrainingSummary(
        role=role,
        steps=int(summary["steps"]),
        seconds=float(summary["seconds"]),
        model_path=str(summary["final_model"]),
        reward_wait_s=float(summary["reward_wait_s"]),
    )


@hookimpl
def register_commands(cli):
    from kz_policy_hf.train_command import register

    register(cli)
