"""Which model a role loads, on which device and dtype, the load cache, and the errors users see."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from kz_core.config import PolicyConfig
from kz_core.model import ChatMessage, Prompt

from kz_policy_hf import PolicyError, loading
from kz_policy_hf.loading import load_policy, model_source, resolve_device, resolve_dtype
from kz_policy_hf.sampling import sample_completions

PROMPT = Prompt("p", (ChatMessage("user", "hello"),))


def test_proposer_uses_its_own_model_when_set() -> None:
    config = PolicyConfig(model="org/coder", proposer_model="org/proposer")
    assert model_source(config, "coder") == "org/coder"
    assert model_source(config, "proposer") == "org/proposer"


def test_proposer_falls_back_to_the_coders_model() -> None:
    assert model_source(PolicyConfig(model="org/coder"), "proposer") == "org/coder"


def test_empty_model_means_the_embedded_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(loading, "embedded_model_path", lambda: tmp_path / "embedded")
    assert model_source(PolicyConfig(), "coder") == str(tmp_path / "embedded")
    assert model_source(PolicyConfig(proposer_model=" "), "proposer") == str(tmp_path / "embedded")


def test_unknown_role_is_an_error() -> None:
    with pytest.raises(PolicyError, match="unknown policy role 'critic'"):
        model_source(PolicyConfig(model="org/x"), "critic")


def test_a_missing_folder_or_an_adapter_as_the_model_is_said_plainly(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="no such folder"):
        model_source(PolicyConfig(model=str(tmp_path / "runs" / "sft" / "final")), "coder")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    with pytest.raises(PolicyError, match="is a LoRA adapter, not a model: set policy.adapter="):
        model_source(PolicyConfig(proposer_model=str(adapter)), "proposer")
    assert model_source(PolicyConfig(model="org/name"), "coder") == "org/name"  # a Hub id is not checked here


def test_auto_device_and_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda", 0)) == torch.bfloat16
    assert resolve_dtype("float16", torch.device("cpu")) == torch.float16


@pytest.mark.parametrize("name", ["int8", "bfloat", "device"])
def test_dtype_must_be_a_torch_floating_dtype(name: str) -> None:
    with pytest.raises(PolicyError, match="policy.dtype"):
        resolve_dtype(name, torch.device("cpu"))


def test_bad_device_names_say_what_to_use(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PolicyError, match="not a torch device"):
        resolve_device("gpu0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(PolicyError, match="no GPU"):
        resolve_device("cuda:0")


def test_missing_local_folder_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-checkpoint"
    with pytest.raises(PolicyError, match="does not exist"):
        load_policy(str(missing), "cpu")
    with pytest.raises(PolicyError, match="does not exist"):
        load_policy("./no/such/checkpoint", "cpu")


def test_folder_without_config_is_not_a_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(PolicyError, match="no config.json"):
        load_policy(str(tmp_path), "cpu")
    with pytest.raises(PolicyError, match="is a file"):
        load_policy(str(tmp_path / "weights.bin"), "cpu")


def test_broken_checkpoint_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(PolicyError, match="cannot load the checkpoint"):
        load_policy(str(tmp_path), "cpu")


def test_model_id_not_cached_offline_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # so that the id cannot be a relative folder
    with pytest.raises(PolicyError) as error:
        load_policy("kz-tests/no-such-model", "cpu")
    message = str(error.value)
    assert "'kz-tests/no-such-model'" in message
    assert "HF_HUB_OFFLINE" in message
    assert "hf download kz-tests/no-such-model" in message


@pytest.mark.parametrize(
    ("n", "overrides", "complaint"),
    [
        (0, {}, "n=0"),
        (1, {"batch_size": 0}, "batch_size=0"),
        (1, {"max_new_tokens": 0}, "max_new_tokens=0"),
        (1, {"temperature": -0.5}, "temperature=-0.5"),
        (1, {"top_p": 0.0}, "top_p=0.0"),
    ],
)
def test_invalid_options_are_rejected_before_loading(n: int, overrides: dict[str, object], complaint: str) -> None:
    config = PolicyConfig(model="/no/such/folder/is/loaded", **overrides)  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match=complaint):
        sample_completions([PROMPT], n, "coder", config)


def test_loaded_once_and_reloaded_when_the_folder_changes(tiny_model_dir: Path, tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "checkpoint"
    shutil.copytree(tiny_model_dir, folder)
    first = load_policy(str(folder), "cpu")
    assert load_policy(str(folder), "cpu") is first
    assert first.device == torch.device("cpu")
    assert first.model.dtype == torch.float32
    assert first.eos_token_ids == (2,)
    assert first.pad_token_id == 0
    config = folder / "config.json"
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 10**9))  # as if rewritten
    assert load_policy(str(folder), "cpu") is not first


@pytest.mark.slow
def test_an_adapter_is_merged_once_into_a_checkpoint(tmp_path: Path) -> None:
    """policy.adapter: the LoRA adapter merged into the model gives the adapted model's
    outputs; a second use reuses the merged folder; the Proposer's own model takes
    policy.proposer_adapter instead."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = model_source(PolicyConfig(model="embedded:tiny"), "coder")
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    with torch.no_grad():
        for name, weight in peft_model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0, 0.5)  # a zero B (peft's initialisation) would change nothing
    peft_model.save_pretrained(tmp_path / "adapter")
    ids = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        expected = peft_model(ids).logits
        plain = AutoModelForCausalLM.from_pretrained(base)(ids).logits
    config = PolicyConfig(model="embedded:tiny", adapter=str(tmp_path / "adapter"))
    merged = model_source(config, "coder")
    assert merged != base and model_source(config, "coder") == merged
    assert model_source(config, "proposer") == merged
    with torch.no_grad():
        logits = AutoModelForCausalLM.from_pretrained(merged)(ids).logits
    assert torch.allclose(logits, expected, atol=1e-4) and not torch.allclose(logits, plain, atol=1e-3)
    own = PolicyConfig(model="embedded:tiny", adapter=str(tmp_path / "adapter"), proposer_model=base)
    assert model_source(own, "proposer") == base
    assert model_source(PolicyConfig(model="embedded:tiny", proposer_model=base, proposer_adapter=str(tmp_path / "adapter")), "proposer") == merged


def test_a_folder_that_is_not_an_adapter_says_so(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="is not a LoRA adapter folder"):
        model_source(PolicyConfig(model="embedded:tiny", adapter=str(tmp_path)), "coder")


def test_a_base_model_retrained_in_place_gets_the_adapter_merged_again(tmp_path: Path) -> None:
    import shutil

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = tmp_path / "base"
    shutil.copytree(model_source(PolicyConfig(model="embedded:tiny"), "coder"), base)
    get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=2, target_modules="all-linear")).save_pretrained(tmp_path / "adapter")
    config = PolicyConfig(model=str(base), adapter=str(tmp_path / "adapter"))
    first = model_source(config, "coder")
    weights = next(p for p in base.iterdir() if p.suffix == ".safetensors")
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    assert model_source(config, "coder") != first
