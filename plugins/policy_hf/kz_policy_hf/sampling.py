"""Sample completions from a policy with Hugging Face transformers ``generate``.

What the ``hf`` sampler does for ``sample_completions``: render each prompt's chat messages
(the tokenizer's chat template, or a plain ``role: content`` transcript when it has none),
left-pad ``policy.batch_size`` prompts at a time into one ``generate`` call that returns ``n``
samples per prompt, and cut each sample at its first end-of-sequence token.

Only the ``policy`` config decides how tokens are drawn: ``temperature`` (0: greedy),
``top_p`` and ``max_new_tokens``; top-k filtering and repetition penalties that a model's own
``generation_config.json`` may ask for are switched off, as TRL's GRPO trainer does, so that
samples follow the distribution being trained. Sampling is seeded with ``policy.seed`` in a
forked RNG (the caller's random state is left as it was): the same seed, prompts, batch size
and model give the same completions on the same machine.

This module samples; it must not load models itself (:mod:`kz_policy_hf.loading` does) and
must not evaluate or score what it samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from kz_core import Completion, Prompt
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from kz_policy_hf.errors import PolicyError
from kz_policy_hf.loading import LoadedPolicy, load_policy, model_source

if TYPE_CHECKING:
    from kz_core import PolicyConfig


def sample_completions(prompts: Sequence[Prompt], n: int, role: str, config: PolicyConfig) -> list[list[Completion]]:
    """Sample ``n`` completions for each prompt from the role's model.

    :param prompts: the chat prompts.
    :param n: samples per prompt, at least 1.
    :param role: ``"coder"`` or ``"proposer"``; picks the model (see
        :func:`kz_policy_hf.loading.model_source`).
    :param config: the ``policy`` config section.
    :returns: one list per prompt, in the prompts' order, of ``n`` completions with
        ``sample_index`` 0..n-1; ``text`` is the decoded reply without special tokens,
        ``tokens`` the number of tokens generated, counting the end-of-sequence token
        when the reply has one.
    :raises PolicyError: an invalid option, or a model that cannot be loaded.
    """
    _check_options(n, config)
    prompts = list(prompts)
    if not prompts:
        return []
    policy = load_policy(model_source(config, role), config.device, config.dtype)
    token_ids = [_encode(policy.tokenizer, prompt) for prompt in prompts]
    generation_config = _generation_config(n, config, policy)
    batches = [
        range(start, min(start + config.batch_size, len(prompts)))
        for start in range(0, len(prompts), config.batch_size)
    ]

    completions: list[list[Completion]] = []
    rng_devices = [policy.device] if policy.device.type == "cuda" else []
    with _progress(len(batches) > 1) as progress, torch.random.fork_rng(devices=rng_devices, device_type="cuda"):
        task = progress.add_task(f"sampling {len(prompts)}×{n} {role} completions", total=len(batches))
        _seed(policy.device, config.seed)
        for batch in batches:
            input_ids, attention_mask = left_pad([token_ids[index] for index in batch], policy.pad_token_id)
            with torch.inference_mode():
                output = policy.model.generate(
                    input_ids=input_ids.to(policy.device),
                    attention_mask=attention_mask.to(policy.device),
                    generation_config=generation_config,
                )
            new_tokens = output[:, input_ids.shape[1] :].tolist()  # (len(batch) * returned, generated)
            returned = generation_config.num_return_sequences
            for offset, index in enumerate(batch):
                rows = new_tokens[offset * returned : (offset + 1) * returned]
                rows = rows if returned == n else rows * n  # greedy: one decode, n identical samples
                completions.append([_completion(prompts[index], role, k, row, policy) for k, row in enumerate(rows)])
            progress.advance(task)
    return completions


def render_prompt(prompt: Prompt, tokenizer: Any) -> tuple[str, bool]:
    """The text a prompt becomes before tokenising, ending where the reply begins.

    :param prompt: the chat prompt.
    :param tokenizer: a transformers tokenizer.
    :returns: the text, and whether the tokenizer should still add its special tokens (BOS):
        False for a chat template's output, which places them itself; True for the plain
        ``role: content`` transcript used when the tokenizer has no chat template.
    """
    messages = prompt.chat()
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return str(text), False
    transcript = "".join(f"{message['role']}: {message['content']}\n" for message in messages)
    return transcript + "assistant:", True


def left_pad(sequences: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token id lists to one batch, so that every prompt ends at the last column.

    :returns: ``input_ids`` and ``attention_mask``, both ``(len(sequences), longest)`` int64;
        the mask is 0 on padding.
    """
    longest = max(len(sequence) for sequence in sequences)
    input_ids = torch.full((len(sequences), longest), pad_token_id, dtype=torch.long)  # (B, T)
    attention_mask = torch.zeros((len(sequences), longest), dtype=torch.long)  # (B, T)
    for row, sequence in enumerate(sequences):
        if sequence:
            input_ids[row, longest - len(sequence) :] = torch.tensor(list(sequence), dtype=torch.long)
            attention_mask[row, longest - len(sequence) :] = 1
    return input_ids, attention_mask


def generated_length(token_ids: Sequence[int], eos_token_ids: Sequence[int]) -> int:
    """How many tokens were generated: up to and including the first end-of-sequence token.

    ``generate`` fills a finished row with padding until the batch's longest row is done;
    that filling is not part of the completion.
    """
    stops = set(eos_token_ids)
    for position, token in enumerate(token_ids):
        if token in stops:
            return position + 1
    return len(token_ids)


def _encode(tokenizer: Any, prompt: Prompt) -> list[int]:
    text, add_special_tokens = render_prompt(prompt, tokenizer)
    ids = tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]
    if not ids:
        raise PolicyError(f"prompt {prompt.prompt_id!r} renders to no tokens: give it at least one non-empty message")
    return list(ids)


def _completion(prompt: Prompt, role: str, sample_index: int, row: list[int], policy: LoadedPolicy) -> Completion:
    length = generated_length(row, policy.eos_token_ids)
    reply = row[:length]
    if reply and reply[-1] in policy.eos_token_ids:
        reply = reply[:-1]
    text = policy.tokenizer.decode(reply, skip_special_tokens=True)
    return Completion(prompt_id=prompt.prompt_id, role=role, text=text, sample_index=sample_index, tokens=length)


def _generation_config(n: int, config: PolicyConfig, policy: LoadedPolicy) -> Any:
    from transformers import GenerationConfig

    sampling = config.temperature > 0
    options: dict[str, Any] = {
        "max_new_tokens": config.max_new_tokens,
        # Greedy decoding is deterministic: decode once and repeat it n times.
        "num_return_sequences": n if sampling else 1,
        "do_sample": sampling,
        "pad_token_id": policy.pad_token_id,
        "eos_token_id": list(policy.eos_token_ids) or None,
        "repetition_penalty": 1.0,
    }
    if sampling:
        options.update(temperature=config.temperature, top_p=config.top_p, top_k=0)
    return GenerationConfig(**options)


def _seed(device: torch.device, seed: int) -> None:
    """Seed the generators sampling draws from: the CPU's and the policy's GPU's, no other."""
    torch.default_generator.manual_seed(seed)
    if device.type == "cuda":
        with torch.cuda.device(device):
            torch.cuda.manual_seed(seed)


def _check_options(n: int, config: PolicyConfig) -> None:
    problems = []
    if n < 1:
        problems.append(f"n={n} samples per prompt (need at least 1)")
    if config.batch_size < 1:
        problems.append(f"policy.batch_size={config.batch_size} (need at least 1)")
    if config.max_new_tokens < 1:
        problems.append(f"policy.max_new_tokens={config.max_new_tokens} (need at least 1)")
    if not (math.isfinite(config.temperature) and config.temperature >= 0):
        problems.append(f"policy.temperature={config.temperature} (need 0 for greedy, or a positive number)")
    if not (0 < config.top_p <= 1):
        problems.append(f"policy.top_p={config.top_p} (need 0 < top_p <= 1)")
    if problems:
        raise PolicyError("cannot sample with " + "; ".join(problems))


def _progress(visible: bool) -> Progress:
    """A progress bar over batches on stderr; hidden when there is a single batch."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("batches"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not visible,
    )
