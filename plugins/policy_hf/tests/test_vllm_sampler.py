"""The vLLM sampler: a clear error without vLLM; real sampling where it is installed."""

from __future__ import annotations

import importlib.util

import pytest

from kz_core.config import load_config
from kz_core.model import ChatMessage, Prompt
from kz_core.plugins import get_plugin_manager

from kz_policy_hf.errors import PolicyError

PROMPT = Prompt("p", (ChatMessage("user", "Say hi."),))
HAS_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_sample_completions_hook_with_vllm_missing_says_how_to_install_it():
    config = load_config(None, ["policy.sampler=vllm", "policy.model=org/not-downloaded"]).policy
    with pytest.raises(PolicyError, match=r"pip install 'kz-policy-hf\[vllm\]'"):
        get_plugin_manager().hook.sample_completions(prompts=[PROMPT], n=1, role="coder", config=config)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed")
def test_vllm_samples_n_completions_per_prompt():
    config = load_config(None, ["policy.sampler=vllm", "policy.max_new_tokens=8", "policy.temperature=0"]).policy
    out = get_plugin_manager().hook.sample_completions(prompts=[PROMPT, PROMPT], n=2, role="coder", config=config)
    assert [[c.sample_index for c in group] for group in out] == [[0, 1], [0, 1]]
    assert all(c.tokens >= 1 for group in out for c in group)
