"""The kz hook implementations of kz-policy-hf (entry point ``policy_hf``).

Only the hook functions live here; they answer when the config names this plugin's sampler
(``policy.sampler: hf``, or ``vllm`` where vLLM is installed) and delegate to
:mod:`kz_policy_hf.sampling` or :mod:`kz_policy_hf.vllm_sampler`. This module must not
import torch or transformers at import time: ``kz`` loads every plugin at start-up, and a
command that samples nothing must not pay for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kz_core import hookimpl

if TYPE_CHECKING:
    from kz_core.config import PolicyConfig
    from kz_core.model import Completion, Prompt

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
def register_commands(cli):
    from kz_policy_hf.train_command import register

    register(cli)
