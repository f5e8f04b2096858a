"""Sampling with vLLM (``policy.sampler: vllm``), where vLLM is installed.

vLLM is an optional extra (``pip install 'kz-policy-hf[vllm]'``): this module imports it
only when the sampler is asked for, and says how to install it when it is missing. The
prompts are rendered exactly as the ``hf`` sampler renders them (the tokenizer's chat
template), and the same ``policy`` options apply: ``temperature`` (0: greedy), ``top_p``,
``max_new_tokens``, ``seed``. One engine per model and dtype is kept for the process.

This module samples; it does not train or evaluate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kz_core import Completion, Prompt

from kz_policy_hf.errors import PolicyError
from kz_policy_hf.loading import model_source
from kz_policy_hf.sampling import _check_options, render_prompt

if TYPE_CHECKING:
    from kz_core import PolicyConfig

_ENGINES: dict[tuple[str, str], Any] = {}


def _engine(source: str, dtype: str) -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise PolicyError("policy.sampler=vllm needs vLLM: pip install 'kz-policy-hf[vllm]' (on a machine with a GPU)") from exc
    key = (source, dtype)
    if key not in _ENGINES:
        _ENGINES[key] = vllm.LLM(model=source, dtype="auto" if dtype == "auto" else dtype, trust_remote_code=False)
    return _ENGINES[key]


def sample_completions(prompts: Sequence[Prompt], n: int, role: str, config: PolicyConfig) -> list[list[Completion]]:
    """``n`` completions per prompt from vLLM (see :func:`kz_policy_hf.sampling.sample_completions`)."""
    _check_options(n, config)
    prompts = list(prompts)
    if not prompts:
        return []
    llm = _engine(model_source(config, role), config.dtype)  # says how to install vLLM when absent
    from vllm import SamplingParams

    tokenizer = llm.get_tokenizer()
    texts = [render_prompt(prompt, tokenizer)[0] for prompt in prompts]
    params = SamplingParams(
        n=n,
        temperature=config.temperature,
        top_p=config.top_p if config.temperature > 0 else 1.0,
        max_tokens=config.max_new_tokens,
        seed=config.seed,
    )
    outputs = llm.generate(texts, params)
    return [
        [Completion(prompt.prompt_id, role, choice.text, index, len(choice.token_ids)) for index, choice in enumerate(output.outputs)]
        for prompt, output in zip(prompts, outputs)
    ]
