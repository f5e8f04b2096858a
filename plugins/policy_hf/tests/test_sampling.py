"""Sampling with the ``hf`` sampler on a tiny random Llama: shapes, order, seeds, greedy, EOS."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from pathlib import Path

import pluggy
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from kz_core import hookspecs
from kz_core.config import PolicyConfig
from kz_core.model import ChatMessage, Completion, Prompt

from kz_policy_hf import plugin
from kz_policy_hf.loading import clear_cache, load_policy
from kz_policy_hf.sampling import generated_length, left_pad, render_prompt, sample_completions

PROMPTS = (
    Prompt("relu", (ChatMessage("user", "Write a Triton kernel for ReLU."),)),
    Prompt(
        "softmax",
        (
            ChatMessage("system", "You write fast, correct GPU kernels."),
            ChatMessage("user", "Write a fused softmax over the last dimension of a (B, N) tensor."),
        ),
    ),
    Prompt("add", (ChatMessage("user", "x + y"),)),
)


def policy_config(model: Path, **overrides: object) -> PolicyConfig:
    options: dict[str, object] = {
        "model": str(model), "device": "cpu", "max_new_tokens": 12, "batch_size": 2, "temperature": 1.0, "top_p": 1.0,
    }
    options.update(overrides)
    return PolicyConfig(**options)  # type: ignore[arg-type]


def texts(completions: list[list[Completion]]) -> list[list[str]]:
    return [[completion.text for completion in group] for group in completions]


@pytest.fixture
def hook_caller() -> pluggy.PluginManager:
    """A plugin manager with kz's hook specs and only this plugin registered."""
    manager = pluggy.PluginManager("kz")
    manager.add_hookspecs(hookspecs)
    manager.register(plugin, name="policy_hf")
    manager.check_pending()
    return manager


def test_entry_point_names_the_plugin_module() -> None:
    entry_points = {entry_point.name: entry_point.value for entry_point in importlib.metadata.entry_points(group="kz")}
    assert entry_points.get("policy_hf") == "kz_policy_hf.plugin"


def test_sample_completions_hook_answers_none_for_another_sampler(
    hook_caller: pluggy.PluginManager, tiny_model_dir: Path
) -> None:
    config = policy_config(tiny_model_dir, sampler="some-other-sampler")
    assert hook_caller.hook.sample_completions(prompts=PROMPTS, n=2, role="coder", config=config) is None


def test_sample_completions_hook_returns_n_completions_per_prompt_in_order(
    hook_caller: pluggy.PluginManager, tiny_model_dir: Path
) -> None:
    config = policy_config(tiny_model_dir)
    result = hook_caller.hook.sample_completions(prompts=PROMPTS, n=3, role="proposer", config=config)
    assert [[c.prompt_id for c in group] for group in result] == [[p.prompt_id] * 3 for p in PROMPTS]
    assert [[c.sample_index for c in group] for group in result] == [[0, 1, 2]] * len(PROMPTS)
    assert {c.role for group in result for c in group} == {"proposer"}
    assert all(1 <= c.tokens <= config.max_new_tokens for group in result for c in group)
    assert all(isinstance(c.text, str) for group in result for c in group)


def test_same_seed_gives_identical_completions_even_after_reloading(tiny_model_dir: Path) -> None:
    config = policy_config(tiny_model_dir, seed=7)
    first = sample_completions(PROMPTS, 4, "coder", config)
    clear_cache()
    second = sample_completions(PROMPTS, 4, "coder", config)
    assert first == second
    assert len({text for group in texts(first) for text in group}) > 1, "random samples should differ from each other"


def test_another_seed_gives_other_completions(tiny_model_dir: Path) -> None:
    first = sample_completions(PROMPTS, 4, "coder", policy_config(tiny_model_dir, seed=7))
    second = sample_completions(PROMPTS, 4, "coder", policy_config(tiny_model_dir, seed=8))
    assert texts(first) != texts(second)


def test_sampling_leaves_the_callers_random_state_alone(tiny_model_dir: Path) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    sample_completions(PROMPTS[:1], 2, "coder", policy_config(tiny_model_dir, seed=5))
    assert torch.equal(torch.rand(3), expected)


def test_greedy_gives_n_identical_samples_independent_of_batching(tiny_model_dir: Path) -> None:
    greedy = {"temperature": 0.0}
    batched = sample_completions(PROMPTS, 3, "coder", policy_config(tiny_model_dir, batch_size=3, seed=1, **greedy))
    one_by_one = sample_completions(PROMPTS, 3, "coder", policy_config(tiny_model_dir, batch_size=1, seed=2, **greedy))
    for group in batched:
        assert [c.sample_index for c in group] == [0, 1, 2]
        assert len({(c.text, c.tokens) for c in group}) == 1
    # Left padding must not change what a prompt's greedy decode is.
    assert texts(batched) == texts(one_by_one)


def test_greedy_matches_a_direct_generate_call_and_stops_at_eos(tiny_model_dir: Path, tmp_path: Path) -> None:
    policy = load_policy(str(tiny_model_dir), "cpu")
    text, _ = render_prompt(PROMPTS[0], policy.tokenizer)
    prompt_ids = torch.tensor([policy.tokenizer(text, add_special_tokens=False)["input_ids"]])
    direct = policy.model.generate(
        input_ids=prompt_ids, attention_mask=torch.ones_like(prompt_ids), do_sample=False, max_new_tokens=12,
        eos_token_id=None, pad_token_id=0,
    )[0, prompt_ids.shape[1] :].tolist()
    assert len(direct) == 12

    # Make the third generated token an end-of-sequence token of a copy of the model (the
    # tokenizer's <|im_end|> still counts as one too).
    stop_token = direct[2]
    stops = (stop_token, policy.tokenizer.eos_token_id)
    expected_length = next(i for i, token in enumerate(direct) if token in stops) + 1
    copy = tmp_path / "tiny-with-another-eos"
    shutil.copytree(tiny_model_dir, copy)
    generation = json.loads((copy / "generation_config.json").read_text())
    generation["eos_token_id"] = stop_token
    (copy / "generation_config.json").write_text(json.dumps(generation))

    [[completion]] = sample_completions(PROMPTS[:1], 1, "coder", policy_config(copy, temperature=0.0))
    assert completion.tokens == expected_length
    assert completion.text == policy.tokenizer.decode(direct[: expected_length - 1], skip_special_tokens=True)


def test_tokenizer_without_chat_template_samples_from_a_plain_transcript(tiny_plain_model_dir: Path) -> None:
    policy = load_policy(str(tiny_plain_model_dir), "cpu")
    text, add_special_tokens = render_prompt(PROMPTS[1], policy.tokenizer)
    assert text == (
        "system: You write fast, correct GPU kernels.\n"
        "user: Write a fused softmax over the last dimension of a (B, N) tensor.\n"
        "assistant:"
    )
    assert add_special_tokens
    result = sample_completions(PROMPTS, 2, "coder", policy_config(tiny_plain_model_dir))
    assert [len(group) for group in result] == [2, 2, 2]


def test_chat_template_ends_with_the_assistant_turn(tiny_model_dir: Path) -> None:
    policy = load_policy(str(tiny_model_dir), "cpu")
    text, add_special_tokens = render_prompt(PROMPTS[0], policy.tokenizer)
    assert text == "<|im_start|>user\nWrite a Triton kernel for ReLU.<|im_end|>\n<|im_start|>assistant\n"
    assert not add_special_tokens


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_gpu_sampling_is_seeded_in_bfloat16_and_leaves_the_gpu_random_state_alone(tiny_model_dir: Path) -> None:
    config = policy_config(tiny_model_dir, device="auto", dtype="auto", seed=3)
    policy = load_policy(str(tiny_model_dir), "auto", "auto")
    assert policy.device.type == "cuda"
    assert policy.model.dtype == torch.bfloat16
    torch.cuda.manual_seed(99)
    expected = torch.rand(3, device="cuda")
    torch.cuda.manual_seed(99)
    first = sample_completions(PROMPTS, 4, "coder", config)
    assert torch.equal(torch.rand(3, device="cuda"), expected)
    assert sample_completions(PROMPTS, 4, "coder", config) == first
    other_seed = policy_config(tiny_model_dir, device="auto", seed=4)
    assert texts(sample_completions(PROMPTS, 4, "coder", other_seed)) != texts(first)


def test_no_prompts_give_no_completions(tiny_model_dir: Path) -> None:
    assert sample_completions([], 3, "coder", policy_config(tiny_model_dir)) == []


def test_left_pad_aligns_prompts_on_the_right() -> None:
    input_ids, attention_mask = left_pad([[5, 6, 7], [8]], pad_token_id=0)
    assert input_ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert attention_mask.tolist() == [[1, 1, 1], [0, 0, 1]]


@given(
    st.lists(st.integers(min_value=0, max_value=9), max_size=30),
    st.sets(st.integers(min_value=0, max_value=9), max_size=3),
)
def test_generated_length_stops_after_the_first_eos(row: list[int], eos: set[int]) -> None:
    length = generated_length(row, sorted(eos))
    assert 0 <= length <= len(row)
    assert not any(token in eos for token in row[: max(length - 1, 0)])
    if any(token in eos for token in row):
        assert row[length - 1] in eos
    else:
        assert length == len(row)
