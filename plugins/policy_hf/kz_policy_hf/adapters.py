"""LoRA adapters applied to a policy model (``policy.adapter``), merged once into a checkpoint.

An adapter folder (``adapter_config.json`` and ``adapter_model.safetensors``, what peft's
``save_pretrained`` and ``kz train sft``'s ``adapter/`` hold) is merged into its base model
on first use and the result written, like the embedded model, as a plain checkpoint under
``<cache>/models/adapted-<digest>``, where the digest covers the base model (for a local
folder, its files' names, sizes and times too) and the adapter's files. Sampling and training then load that folder like any other local
checkpoint, so every sampler and trainer works with adapters without knowing about them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from kz_core import cache_dir

from kz_policy_hf.embedded import write_atomically
from kz_policy_hf.errors import PolicyError

#: Written last into a finished merge: the base model and the adapter it came from.
MARKER_FILE = "kz-adapted.json"
#: The files of an adapter folder that decide the merged weights.
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
_merge_lock = threading.Lock()


def adapted_model_path(base: str, adapter: str) -> Path:
    """The folder of ``base`` with the LoRA adapter ``adapter`` merged in, merging on first use.

    :param base: the base model: a local checkpoint folder or a Hugging Face id.
    :param adapter: a folder with ``adapter_config.json`` and ``adapter_model.safetensors``.
    :raises PolicyError: the adapter folder is incomplete, does not fit the base model, or
        the cache is not writable.
    """
    folder = Path(adapter).expanduser()
    missing = [name for name in ADAPTER_FILES if not (folder / name).is_file()]
    if missing:
        raise PolicyError(
            f"policy.adapter {adapter} is not a LoRA adapter folder (it lacks {', '.join(missing)}): "
            "give the adapter/ folder of `kz train sft` or a peft save_pretrained folder, or leave it empty"
        )
    digest = hashlib.sha256(base.encode())
    if Path(base).is_dir():  # a local checkpoint retrained in place is another base model
        from kz_policy_hf.loading import _fingerprint

        digest.update(repr(_fingerprint(Path(base))).encode())
    for name in ADAPTER_FILES:
        digest.update((folder / name).read_bytes())
    target = cache_dir() / "models" / f"adapted-{digest.hexdigest()[:16]}"
    with _merge_lock:
        if not (target / MARKER_FILE).is_file():
            write_atomically(target, lambda partial: _merge(base, folder, partial), f"{base} with the adapter {folder}")
    return target


def _merge(base: str, adapter: Path, destination: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, local_files_only=Path(base).is_dir())
    try:
        merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    except (ValueError, KeyError, RuntimeError) as exc:
        raise PolicyError(f"the adapter {adapter} does not fit the model {base}: {exc}") from exc
    merged.save_pretrained(str(destination))
    tokenizer_source = adapter if (adapter / "tokenizer_config.json").is_file() else base
    AutoTokenizer.from_pretrained(str(tokenizer_source)).save_pretrained(str(destination))
    (destination / MARKER_FILE).write_text(json.dumps({"base": base, "adapter": str(adapter.resolve())}, indent=2) + "\n", encoding="utf-8")
