"""A tiny, randomly initialised Llama for smoke tests of the training loop.

``policy.model=embedded:tiny`` selects it: two layers of width 64 with the embedded
SmolLM2's tokenizer and chat template, built once (seeded, so always the same weights)
into the kz cache folder. It writes noise; its use is to run every stage of sampling and
training in seconds on a CPU.
"""

from __future__ import annotations

from pathlib import Path

from kz_core import cache_dir

from kz_policy_hf.embedded import MARKER_FILE, embedded_model_path, write_atomically

TINY_MODEL_NAME = "tiny-random-llama"


def tiny_model_path() -> Path:
    """The tiny model's folder (written on first use)."""
    target = cache_dir() / "models" / TINY_MODEL_NAME
    if (target / MARKER_FILE).is_file():
        return target
    tokenizer_source = embedded_model_path()
    write_atomically(target, lambda folder: _build(folder, tokenizer_source), "the tiny random model")
    return target


def _build(folder: Path, tokenizer_source: Path) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, local_files_only=True)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / MARKER_FILE).write_text('{"model": "tiny random llama, seed 0"}\n')
