"""Load a policy's model and tokenizer for sampling, once per process.

Turns the ``policy`` config into a loaded model: which model a role uses (``proposer_model``
for the Proposer when set, else ``model``; empty means the embedded SmolLM2), which device
and dtype ``auto`` mean here, and a cache so that repeated sampling calls reuse the loaded
weights. A local checkpoint folder that changes on disk (a trainer saved new weights into it)
is loaded again on the next call.

This module loads; it must not sample (:mod:`kz_policy_hf.sampling`) or convert GGUF files
(:mod:`kz_policy_hf.embedded`). Every failure a user can fix is a
:class:`~kz_policy_hf.errors.PolicyError` whose message says what to change.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from loguru import logger

from kz_policy_hf.embedded import embedded_model_path
from kz_policy_hf.errors import PolicyError

if TYPE_CHECKING:
    from kz_core import PolicyConfig

ROLES = ("coder", "proposer")


@dataclass(frozen=True)
class LoadedPolicy:
    """A model ready for ``generate`` and the tokenizer that goes with it.

    :ivar source: the model id or the absolute checkpoint folder it was loaded from.
    :ivar model: the causal language model, in eval mode, on ``device``.
    :ivar tokenizer: its tokenizer.
    :ivar device: where the model's weights live.
    :ivar eos_token_ids: every token id that ends a completion (the model's generation
        config's and the tokenizer's), possibly empty.
    :ivar pad_token_id: the id used to left-pad prompts (masked out, never attended to).
    """

    source: str
    model: Any
    tokenizer: Any
    device: torch.device
    eos_token_ids: tuple[int, ...]
    pad_token_id: int


# (source, device, dtype) -> (fingerprint of the folder's files, loaded policy)
_cache: dict[tuple[str, str, str], tuple[tuple[Any, ...], LoadedPolicy]] = {}
_lock = threading.Lock()


def model_source(config: PolicyConfig, role: str) -> str:
    """The model a role samples from: a Hugging Face id or a local folder.

    :param config: the ``policy`` config section.
    :param role: ``"coder"`` or ``"proposer"``.
    :returns: ``config.proposer_model`` for the Proposer when set, else ``config.model``;
        when that is empty, the embedded model's folder (converted on first use); with an
        adapter (``config.adapter``, ``config.proposer_adapter`` for the Proposer's own
        model), that model with the adapter merged in (merged on first use).
    :raises PolicyError: an unknown role, or the embedded model cannot be prepared.
    """
    if role not in ROLES:
        raise PolicyError(f"unknown policy role {role!r}: sample as one of {', '.join(ROLES)}")
    own_model = role == "proposer" and bool(config.proposer_model)
    chosen = (config.proposer_model if own_model else config.model or "").strip()
    if chosen == "embedded:tiny":
        from kz_policy_hf.tiny import tiny_model_path

        source = str(tiny_model_path())
    else:
        if chosen and chosen != "embedded:smollm2":
            _check_local(chosen, "policy.proposer_model" if own_model else "policy.model")
            source = chosen
        else:
            source = str(embedded_model_path())
    adapter = ((config.proposer_adapter if own_model else config.adapter) or "").strip()
    if adapter:
        from kz_policy_hf.adapters import adapted_model_path

        return str(adapted_model_path(source, adapter))
    return source


def _check_local(source: str, key: str) -> None:
    """A value that names a folder must be a model's folder: say what is wrong before
    transformers reads a missing path as a malformed Hub id."""
    path = Path(source).expanduser()
    looks_local = path.is_absolute() or source.startswith((".", "~")) or source.count("/") > 1
    if path.is_dir():
        if not (path / "config.json").is_file() and (path / "adapter_config.json").is_file():
            raise PolicyError(f"{key}={source} is a LoRA adapter, not a model: set policy.adapter={source} (and {key} to its base model)")
    elif looks_local:
        raise PolicyError(f"{key}={source}: no such folder. Give a model folder (with config.json) or a Hugging Face id such as HuggingFaceTB/SmolLM2-135M-Instruct")


def resolve_device(name: str) -> torch.device:
    """``auto`` → the first GPU when there is one, else the CPU; otherwise checked as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise PolicyError(f"policy.device {name!r} is not a torch device: use auto, cpu, cuda or cuda:N") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise PolicyError(f"policy.device is {name!r} but torch sees no GPU here: use policy.device=cpu (or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise PolicyError(
                f"policy.device is {name!r} but torch sees {torch.cuda.device_count()} GPU(s): "
                f"use cuda:0 .. cuda:{torch.cuda.device_count() - 1}"
            )
    return device


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` → bfloat16 on a GPU, float32 on a CPU; otherwise a torch floating dtype's name."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise PolicyError(
            f"policy.dtype {name!r} is not a torch floating dtype: use auto, bfloat16, float16 or float32"
        )
    return dtype


def load_policy(source: str, device_name: str = "auto", dtype_name: str = "auto") -> LoadedPolicy:
    """The model and tokenizer of ``source`` on a device, loaded once per process.

    :param source: a Hugging Face model id or a local checkpoint folder.
    :param device_name: ``policy.device``: ``auto``, ``cpu``, ``cuda``, ``cuda:N``.
    :param dtype_name: ``policy.dtype``: ``auto`` or a torch dtype name.
    :returns: the cached :class:`LoadedPolicy` for this source, device and dtype; reloaded
        when the files of a local folder changed since it was loaded.
    :raises PolicyError: the folder is missing or is not a checkpoint, the id cannot be
        loaded (not cached while offline, unknown, gated), or the device or dtype is invalid.
    """
    device = resolve_device(device_name)
    dtype = resolve_dtype(dtype_name, device)
    folder = _local_folder(source)
    resolved = str(folder) if folder is not None else source
    key = (resolved, str(device), str(dtype))
    fingerprint = _fingerprint(folder) if folder is not None else ()
    with _lock:
        cached = _cache.get(key)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        _cache.pop(key, None)  # free the stale weights before loading new ones
        policy = _load(resolved, folder is not None, device, dtype)
        _cache[key] = (fingerprint, policy)
        return policy


def clear_cache() -> None:
    """Forget every loaded model (frees their memory once nothing else holds them)."""
    with _lock:
        _cache.clear()


def _local_folder(source: str) -> Path | None:
    """The checkpoint folder ``source`` names, None for a hub id; a missing folder is an error."""
    path = Path(source).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise PolicyError(
                f"model folder {path} has no config.json, so it is not a transformers checkpoint: "
                "point policy.model at a folder written by save_pretrained, or at a Hugging Face model id"
            )
        return path.resolve()
    if path.exists():
        raise PolicyError(
            f"policy.model {source!r} is a file; give the checkpoint folder that holds it, or a Hugging Face model id"
        )
    looks_like_path = source.startswith(("/", ".", "~")) or "\\" in source or source.count("/") > 1
    if looks_like_path:
        raise PolicyError(
            f"model folder {path} does not exist: check policy.model (relative paths start from {Path.cwd()}), "
            "or leave it empty for the embedded SmolLM2-135M-Instruct"
        )
    return None


def _fingerprint(folder: Path) -> tuple[Any, ...]:
    """Names, sizes and modification times of a folder's files: changes when weights are rewritten."""
    entries = []
    for path in sorted(folder.iterdir()):
        if path.is_file():
            stat = path.stat()
            entries.append((path.name, stat.st_size, stat.st_mtime_ns))
    return tuple(entries)


def _load(source: str, local: bool, device: torch.device, dtype: torch.dtype) -> LoadedPolicy:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("loading policy model {} on {} in {}", source, device, str(dtype).removeprefix("torch."))
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, local_files_only=local)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        raise PolicyError(_load_failure_message(source, local, exc)) from exc
    model.to(device)
    model.eval()
    eos_token_ids = _eos_token_ids(model, tokenizer)
    pad_token_id = tokenizer.pad_token_id
    if pad_token_id is None:
        pad_token_id = eos_token_ids[0] if eos_token_ids else 0
    return LoadedPolicy(
        source=source,
        model=model,
        tokenizer=tokenizer,
        device=device,
        eos_token_ids=eos_token_ids,
        pad_token_id=int(pad_token_id),
    )


def _eos_token_ids(model: Any, tokenizer: Any) -> tuple[int, ...]:
    configured = getattr(model.generation_config, "eos_token_id", None)
    if configured is None:
        ids: list[int] = []
    elif isinstance(configured, int):
        ids = [configured]
    else:
        ids = [int(token) for token in configured]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(int(tokenizer.eos_token_id))
    return tuple(ids)


def _load_failure_message(source: str, local: bool, exc: Exception) -> str:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if local:
        return (
            f"cannot load the checkpoint in {source}: {detail}. The folder needs config.json, the weights "
            "and the tokenizer files, as save_pretrained writes them"
        )
    from huggingface_hub import constants

    offline = " (offline: HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else ""
    return (
        f"cannot load model {source!r}: {detail}. It is not a local folder, and it could not be loaded "
        f"from the Hugging Face cache or hub{offline}. Download it where there is a network "
        f"(`hf download {source}`), give the path of a local checkpoint folder, or leave policy.model "
        "empty for the embedded SmolLM2-135M-Instruct"
    )
