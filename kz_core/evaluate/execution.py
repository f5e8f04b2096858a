"""Worker-side mechanics shared by reference and candidate runs.

Loading a problem's module, seeding, building inputs on the device, flattening outputs,
fingerprinting and comparing tensors bit for bit, poisoning the allocator's free memory,
snapshotting global torch flags, finding compute-heavy torch ops in a profiler trace.

Runs only inside worker processes (``kz_core/evaluate/worker.py``); never in the caller.
It decides nothing about verdicts: it measures, and the parent judges.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import os
import random
import resource
import secrets
import sys
import traceback
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import torch

from kz_core.evaluate.correctness import flatten_outputs, kernel_checks


def load_module(code: str, name: str, filename: str) -> types.ModuleType:
    """Execute ``code`` as a fresh module named ``name`` (registered in sys.modules, so that
    pickling, dataclasses and Triton's source inspection work). Exceptions propagate."""
    module = types.ModuleType(name)
    module.__file__ = filename
    Path(filename).write_text(code, encoding="utf-8")
    sys.modules[name] = module
    try:
        exec(compile(code, filename, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), Python's random and NumPy from one secret seed."""
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass


def to_device(values: list[Any], device: str) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def make_inputs(problem_module: types.ModuleType, seed: int, device: str) -> list[Any]:
    """``get_inputs()`` under ``seed``, on ``device``.

    On a GPU the inputs are drawn there (``get_inputs`` runs with the GPU as torch's default
    device): KernelBench's level-1 inputs reach 17 GB, which a CPU draws in minutes and the
    GPU in milliseconds. A ``get_inputs`` that cannot run so (it mixes in CPU tensors or
    NumPy) is run again on the CPU under the same seed. Every process makes the same choice,
    so the reference and the candidate always see the same inputs.
    """
    if device.startswith("cuda"):
        seed_everything(seed)
        try:
            with torch.device(device):
                return to_device(list(problem_module.get_inputs()), device)
        except torch.OutOfMemoryError:
            raise
        except Exception:  # noqa: BLE001 - this get_inputs needs the CPU
            pass
    seed_everything(seed)
    return to_device(list(problem_module.get_inputs()), device)


def make_init_inputs(problem_module: types.ModuleType, seed: int) -> list[Any]:
    seed_everything(seed)
    return list(problem_module.get_init_inputs())


def instantiate(model_class: type, init_inputs: list[Any], seed: int, device: str, on_device: bool = False) -> torch.nn.Module:
    """Build a model as KernelBench does: the same seed right before construction, so that
    ``Model`` and ``ModelNew`` declaring the same layers get the same weights.

    :param on_device: build it with ``device`` as torch's default device, so that its
        weights are drawn there (by torch's CUDA generator) and never copied: for a
        problem's large models (``Worker.builds_on_device``), whose weights the CPU draws
        one number at a time (8 GiB of them took 11 s) and then copies to the GPU.
    """
    seed_everything(seed)
    if on_device:
        try:
            with torch.device(device):
                model = model_class(*init_inputs)
        except torch.OutOfMemoryError:
            raise
        except Exception as exc:
            raise RuntimeError(
                f"{type(exc).__name__}: {exc} (raised building the model with {device} as torch's default device: kz builds a problem's models "
                "there when its reference holds at least eval.device_init_mb MiB of parameters and buffers; eval.device_init_mb=0 builds them all on the CPU)"
            ) from exc
    else:
        model = model_class(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    return model


_FINGERPRINT_CHUNK = 1 << 24
#: Inputs of at least this many 32-bit words on a CUDA device are fingerprinted by one
#: Triton kernel (``kz_core.evaluate.device_checks``).
_FINGERPRINT_KERNEL_WORDS = 1 << 24


def module_bytes(problem_module: types.ModuleType, seed: int) -> int | None:
    """Bytes of the parameters and buffers of the problem's ``Model`` at its module's sizes,
    built on torch's meta device (no memory, no data); None where it cannot be built there."""
    init_inputs = make_init_inputs(problem_module, seed)
    try:
        with torch.device("meta"):
            model = problem_module.Model(*init_inputs)
    except Exception:  # noqa: BLE001 - a module that needs data to be built
        return None
    if not isinstance(model, torch.nn.Module):
        return None
    return sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])


def _tensor_fingerprint(value: torch.Tensor, key: int = 0) -> str:
    """A fingerprint of the tensor's dtype, shape and bytes.

    On a CPU: sha256 of the bytes. On a GPU, where inputs can be several gigabytes, no copy
    to the host: two wrapping 64-bit sums over the 32-bit words, computed on the device,
    plain and weighted by a hash of each word's position and ``key`` (integer sums wrap
    the same way in any order, so equal bytes always give equal sums).
    """
    raw = value.detach().contiguous().reshape(-1).view(torch.uint8)
    if raw.device.type == "cpu":
        digest = hashlib.sha256(raw.numpy().tobytes() if raw.numel() else b"").hexdigest()
    else:
        digest = device_sums(raw, key)
    return f"{value.dtype}{tuple(value.shape)}:{digest}"


#: Odd multipliers of the position hash (a 64-bit mixer's, SplitMix64's): its weights are
#: no affine function of the position, which a write could balance without the key.
_MIX = (0x5851F42D4C957F2D, 0x14057B7EF767814F)


def position_weights(position: torch.Tensor, key: int) -> torch.Tensor:
    """The 31-bit weight of each word position (int64) under ``key``: what
    ``device_checks.word_sums`` computes in its kernel, in the same wrapping int64 steps."""
    mixed = (position + key) * _MIX[0]
    mixed = (mixed ^ (mixed >> 29)) * _MIX[1]
    return (mixed ^ (mixed >> 32)) & 0x7FFFFFFF


def device_sums(raw: torch.Tensor, key: int = 0) -> str:
    """The two position-weighted wrapping sums of a flat uint8 tensor, on its device.

    With the public key 0 (inputs, whose fingerprints two processes compare) anyone can
    compute the weights; with :func:`secret_key` (a process's fingerprints of its own
    constants) a kernel that writes into a tensor cannot choose values whose weighted sum
    stays the same."""
    usable = raw.numel() - raw.numel() % 4
    words = raw[:usable].view(torch.int32)
    tail = raw[usable:].to(torch.int64).tolist()
    # The kernel: the same sums in one pass (the torch operations below read the input ten
    # times), and, keyed, at any size: it keeps no weight in memory, where the torch
    # operations leave them in freed blocks that a later allocation of the call hands out.
    device_checks = kernel_checks() if raw.is_cuda and (key or words.numel() >= _FINGERPRINT_KERNEL_WORDS) else None
    if device_checks is not None:
        with contextlib.suppress(Exception):  # a GPU or Triton the kernel does not build for
            plain_sum, weighted_sum = device_checks.word_sums(words, key)
            return f"{plain_sum}:{weighted_sum}:{tail}"
    plain = torch.zeros((), dtype=torch.int64, device=raw.device)
    weighted = torch.zeros((), dtype=torch.int64, device=raw.device)
    for start in range(0, words.numel(), _FINGERPRINT_CHUNK):
        chunk = words[start : start + _FINGERPRINT_CHUNK].to(torch.int64)
        position = torch.arange(start, start + chunk.numel(), dtype=torch.int64, device=raw.device)
        plain += chunk.sum()
        weighted += (chunk * position_weights(position, key)).sum()
    return f"{int(plain)}:{int(weighted)}:{tail}"


_SECRET: tuple[int, int] | None = None


def secret_key() -> int:
    """A key drawn in this process at its first use, never sent anywhere: a worker forked
    after another drew its own gets another (the executor's, which fingerprints the
    module's constants, is not the candidate worker's)."""
    global _SECRET
    if _SECRET is None or _SECRET[0] != os.getpid():
        _SECRET = (os.getpid(), 1 + secrets.randbits(61))
    return _SECRET[1]


def fingerprint(values: list[Any], key: int = 0) -> list[str]:
    """One fingerprint per value: of its dtype, shape and bytes (tensors) or repr (others).
    ``key``: see :func:`device_sums` (tensors on a GPU only; sha256 on a CPU)."""
    return [_tensor_fingerprint(v, key) if isinstance(v, torch.Tensor) else hashlib.sha256(repr(v).encode()).hexdigest() for v in values]


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bits (NaNs with the same payload compare equal)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def storages_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors share memory (an output aliasing an input)."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    try:
        a_start = a.untyped_storage().data_ptr()
        b_start = b.untyped_storage().data_ptr()
        a_end = a_start + a.untyped_storage().nbytes()
        b_end = b_start + b.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return False
    return a_start < b_end and b_start < a_end


def tensor_leaves(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, through lists, tuples and dicts, and the base tensor of
    Triton's host-side wrappers a kernel launch may be given (``triton.reinterpret``'s
    ``TensorWrapper``, a host ``TensorDescriptor``): a kernel given one is given its base."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensor_leaves(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensor_leaves(item)]
    if is_triton_wrapper(value) and isinstance(value.base, torch.Tensor):
        return [value.base]
    return []


def is_triton_wrapper(value: Any) -> bool:
    """Whether ``value`` is a Triton ``TensorWrapper`` or ``TensorDescriptor`` (looked up
    only where Triton is imported already: none exists otherwise)."""
    import sys

    kinds = (
        getattr(sys.modules.get("triton.runtime.jit"), "TensorWrapper", None),
        getattr(sys.modules.get("triton.tools.tensor_descriptor"), "TensorDescriptor", None),
    )
    return any(kind is not None and type(value) is kind for kind in kinds)


def apart_from(leaves: list[Any], kept: list[Any]) -> list[Any]:
    """``leaves`` with each tensor that shares memory with one of ``kept`` (tensors that
    outlive the call: the module's own, an earlier call's outputs) replaced by a copy.

    A forward may return a buffer it keeps and rewrites every call (allocated once, as
    inference code does): its value must be taken before the next call overwrites it.
    """
    kept_tensors = [t for t in kept if isinstance(t, torch.Tensor)]
    return [
        x.clone() if isinstance(x, torch.Tensor) and any(storages_overlap(x, t) for t in kept_tensors) else x
        for x in leaves
    ]


def poison_free_memory(device: str, megabytes: int) -> None:
    """Fill every block the allocator holds free with NaN (all bits set: NaN in every
    floating dtype), after making sure it holds at least ``megabytes`` of them.

    On a GPU, PyTorch's caching allocator reuses freed blocks, so an output the candidate
    allocates and never fully writes reads back NaN instead of a stale reference result.

    The free blocks are filled where they lie (their addresses from the allocator's
    snapshot), not given back to the driver and allocated again: that version emptied the
    cache before every trial, and on an H200 KernelBench level 1 spent 87 s of its trials
    (0.17 s each, up to 3.7 s for a problem of gigabytes) freeing and re-mapping memory
    the next trial allocated again, with the GPU shared.
    """
    if not device.startswith("cuda") or megabytes <= 0:
        return
    # At least one large free block and the small pool's 1 MiB blocks, as before.
    large = torch.empty(megabytes << 20, dtype=torch.uint8, device=device)
    small = [torch.empty(1 << 20, dtype=torch.uint8, device=device) for _ in range(32)]
    del large, small
    blocks = free_blocks(device)
    if blocks is None:  # a torch without the snapshot: give the cache back and fill anew
        torch.cuda.empty_cache()
        large = torch.empty(megabytes << 20, dtype=torch.uint8, device=device).fill_(255)
        small = [torch.empty(1 << 20, dtype=torch.uint8, device=device).fill_(255) for _ in range(32)]
        del large, small
        return
    for address, size in blocks:
        _device_bytes(address, size, device).fill_(255)


def free_blocks(device: str) -> list[tuple[int, int]] | None:
    """``(address, bytes)`` of every block the caching allocator holds free on ``device``
    in its default pool (a CUDA graph's private pool is left alone); None where this
    torch's snapshot does not say."""
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    try:
        try:
            segments = torch.cuda.memory_snapshot(include_traces=False)
        except TypeError:  # a torch before include_traces
            segments = torch.cuda.memory_snapshot()
        found = []
        for segment in segments:
            if segment["device"] != index or tuple(segment.get("segment_pool_id", (0, 0))) != (0, 0):
                continue
            for block in segment["blocks"]:
                if block["state"] in ("inactive", "active_pending_free"):
                    found.append((int(block["address"]), int(block["size"])))
        return found
    except (AttributeError, KeyError, RuntimeError, TypeError):
        return None


class _DeviceBytes:
    """Bytes of device memory at an address, as ``__cuda_array_interface__`` describes
    them (``torch.as_tensor`` then views them without a copy)."""

    def __init__(self, address: int, size: int):
        self.__cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (address, False), "version": 3, "strides": None, "stream": None}


def _device_bytes(address: int, size: int, device: str) -> torch.Tensor:
    return torch.as_tensor(_DeviceBytes(address, size), device=device)


_streams_created = 0
#: Working folders of candidates (with a trailing separator): streams created by code
#: loaded from files inside them are counted.
candidate_dirs: set[str] = set()


def _called_from_candidate() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(tuple(candidate_dirs)):
            return True
        frame = frame.f_back
    return False


def count_stream_creation() -> None:
    """Count every ``torch.cuda.Stream`` that candidate code creates from now on (streams
    that torch, Triton or the profiler create for themselves are not the candidate's)."""
    stream_class = torch.cuda.Stream
    if getattr(stream_class.__new__, "_kz_counts", False):
        return
    original = stream_class.__new__

    def counting_new(cls, *args, **kwargs):
        global _streams_created
        stream = original(cls, *args, **kwargs)
        if _called_from_candidate() and not is_current_stream(stream):
            _streams_created += 1
        return stream

    counting_new._kz_counts = True  # type: ignore[attr-defined]
    stream_class.__new__ = counting_new  # type: ignore[method-assign]


def is_current_stream(stream: Any) -> bool:
    """Whether ``stream`` wraps its device's current stream: ``torch.cuda.current_stream()``
    builds such a wrapper on every call (the kz CUDA API launches through it), and it
    creates no stream. Asks torch for the raw pointer, so no wrapper is built here."""
    try:
        return int(stream.cuda_stream) == int(torch._C._cuda_getCurrentRawStream(stream.device_index))
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return False


def streams_created() -> int:
    return _streams_created


_SHARED_FIELDS = {"device": int, "handle": bytes, "storage_size": int, "storage_offset_bytes": int, "dtype": str, "offset": int}


#: The reference counts of the tensors this process shared (torch's CUDA IPC keeps them in
#: files of this process's /dev/shm), until :func:`release_shared_counters`.
_shared_counters: list[tuple[bytes, int]] = []


def share_cuda_tensor(tensor: torch.Tensor) -> dict[str, Any]:
    """A CUDA IPC description of ``tensor``'s memory, for another process to open.

    The tensor must stay alive until the other process has opened and copied it. Call it
    only once the work that writes the tensor has finished (the receiver does not wait on
    this process's events), and :func:`release_shared_counters` once the receiver is done.

    torch counts a shared tensor's users in a file of the sender's ``/dev/shm`` that the
    receiver decrements when it lets the memory go; the sender's allocator keeps the memory
    until then. Here the receiver never touches that file: each sandboxed worker has a
    ``/dev/shm`` of its own (``isolation.mount_private_shm``), and a count a candidate
    names in its reply is not written by the trusted side. The sender gives the count back
    itself when the evaluator's next request comes.
    """
    torch.cuda.synchronize(tensor.device)
    (device, handle, size, offset_bytes, ref_handle, ref_offset, _event, _sync) = tensor.untyped_storage()._share_cuda_()
    _shared_counters.append((bytes(ref_handle), int(ref_offset)))
    # The count and the event stay here: the receiver uses neither (open_shared_cuda_tensor).
    return {
        "device": int(device), "handle": bytes(handle), "storage_size": int(size), "storage_offset_bytes": int(offset_bytes),
        "dtype": str(tensor.dtype).removeprefix("torch."), "offset": tensor.storage_offset(), "shape": list(tensor.shape), "stride": list(tensor.stride()),
    }


def release_shared_counters() -> int:
    """Give back the reference count of every tensor this process shared, so that its
    allocator may reuse their memory once they are dropped (what torch's receiver does
    when it lets shared memory go). Called before each request a worker answers: the
    evaluator sends the next one only after every comparison of the last reply's shared
    outputs. Returns how many were given back."""
    count = 0
    while _shared_counters:
        handle, offset = _shared_counters.pop()
        torch.UntypedStorage._release_ipc_counter_cuda(handle, offset)
        count += 1
    return count


def timed_output_entries(timed_outputs: list[tuple[int, Any]], share: bool) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """The reply entries for a timing request's outputs, and the leaves to keep alive.

    With ``share``, CUDA outputs go by IPC handle instead of by value; the process must hold
    the returned leaves until the evaluator has opened them.
    """
    entries, held = [], []
    for seed, output in timed_outputs:
        structure, leaves = flatten_outputs(output)
        entry = {"seed": seed, "structure": structure, "outputs": [x if type(x) is torch.Tensor else None for x in leaves]}
        if share:
            entry["shared"] = [share_cuda_tensor(x) if type(x) is torch.Tensor and x.is_cuda and x.numel() else None for x in leaves]
            entry["outputs"] = [None for _ in leaves]
            held.append(leaves)
        entries.append(entry)
    return entries, held


@functools.lru_cache(maxsize=1)
def _libcuda() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def allocation_range(pointer: int) -> tuple[int, int] | None:
    """The device allocation that holds ``pointer``, as the driver knows it: its base
    address and size in bytes (``cuMemGetAddressRange``); None where the driver cannot say
    (no libcuda, no current context)."""
    library = _libcuda()
    if library is None:
        return None
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    try:
        result = library.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(pointer))
    except AttributeError:
        return None
    return (int(base.value), int(size.value)) if result == 0 else None


def open_shared_cuda_tensor(description: dict[str, Any], copy: bool = True) -> torch.Tensor:
    """Copy the tensor another process shared with :func:`share_cuda_tensor`.

    The description comes from an untrusted process: every field is type-checked and the
    view must lie inside the shared storage; the memory is cloned at once, so the sender
    cannot change it afterwards.

    :param copy: False gives the view of the sender's memory itself, for a sender that
        runs no code of its own while it waits (an executor: the candidate's kernels ran
        to completion before it replied, and nothing launches them again until the next
        request). A gigabyte output is then not copied once more to be compared.

    Only the memory handle is used: no reference count and no event of the sender's. Those
    live in the sender's ``/dev/shm``, which a sandboxed sender has to itself; and torch's
    receiver would decrement the count at the offset the reply names, in the file it
    names: a write at an offset the candidate chooses, in this trusted process. Opened
    here under a fresh random name that names no file, the count is left alone (torch
    treats a count it cannot open as a sender already gone); the sender gives it back
    (:func:`release_shared_counters`). The sender finished its work before it replied, so
    nothing is waited for.
    """
    from kz_core.evaluate.wire import TENSOR_DTYPES

    for key, kind in _SHARED_FIELDS.items():
        if type(description.get(key)) is not kind:
            raise ValueError(f"shared tensor field {key!r} must be {kind.__name__}")
    if description["dtype"] not in TENSOR_DTYPES:
        raise ValueError(f"dtype {description['dtype']!r} is not allowed")
    shape = [int(v) for v in description["shape"]]
    stride = [int(v) for v in description["stride"]]
    if len(shape) != len(stride) or any(v < 0 for v in shape + stride) or min(description["offset"], description["storage_size"], description["storage_offset_bytes"]) < 0:
        raise ValueError("malformed shape, stride or offset")
    dtype = getattr(torch, description["dtype"])
    itemsize = torch.empty((), dtype=dtype).element_size()
    last = description["offset"] + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
    if all(shape) and (last + 1) * itemsize > description["storage_size"]:
        raise ValueError("the view reaches beyond the shared storage")
    if not all(shape):
        return torch.empty(shape, dtype=dtype, device=f"cuda:{description['device']}")
    uncounted = f"/kz-uncounted-{secrets.token_hex(16)}".encode()
    storage = torch.UntypedStorage._new_shared_cuda(
        description["device"], description["handle"], description["storage_size"], description["storage_offset_bytes"], uncounted, 0, b"", False
    )
    if copy:
        # From a candidate's own process, the sizes are its word: a storage said to reach
        # past the memory the handle maps would have this process read beyond it (a fault
        # that ends its CUDA context, and the comparison with a reference_error rather
        # than the candidate's own). An executor's sizes are kz's.
        start = int(storage.data_ptr())
        mapped = allocation_range(start)
        if mapped is not None and not (mapped[0] <= start and start + description["storage_size"] <= mapped[0] + mapped[1]):
            raise ValueError(f"the shared storage ({description['storage_size']} bytes) reaches beyond the sender's allocation")
    view = torch.empty((0,), dtype=dtype, device=f"cuda:{description['device']}")
    view.set_(storage, description["offset"], shape, stride)
    if not copy:
        return view
    cloned = view.clone()
    del view, storage
    return cloned


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def global_flags() -> dict[str, Any]:
    """Process-wide torch settings a candidate must not change."""
    flags: dict[str, Any] = {
        "default_dtype": str(torch.get_default_dtype()),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "grad_enabled": torch.is_grad_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "num_threads": torch.get_num_threads(),
    }
    flags["cuda.matmul.allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    flags["cuda.matmul.allow_fp16_reduced_precision_reduction"] = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    flags["cuda.matmul.allow_bf16_reduced_precision_reduction"] = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    flags["cudnn.allow_tf32"] = torch.backends.cudnn.allow_tf32
    flags["cudnn.benchmark"] = torch.backends.cudnn.benchmark
    flags["cudnn.deterministic"] = torch.backends.cudnn.deterministic
    flags["cudnn.enabled"] = torch.backends.cudnn.enabled
    return flags


def set_tf32(enabled: bool) -> None:
    """Pin TF32 for matmuls and convolutions (the reference's numerics are stated by it)."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def restore_flags(flags: dict[str, Any]) -> None:
    """Put back the settings :func:`global_flags` recorded (after a candidate changed them)."""
    torch.set_default_dtype(getattr(torch, flags["default_dtype"].removeprefix("torch.")))
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    torch.set_grad_enabled(flags["grad_enabled"])
    # Only when changed: torch.use_deterministic_algorithms imports torch._inductor (and
    # Dynamo with it), 2.5-4 s of CPU in every fresh worker that would call it.
    deterministic = (flags["deterministic"], flags.get("deterministic_warn_only", False))
    if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) != deterministic:
        torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
    torch.set_num_threads(flags["num_threads"])
    torch.backends.cuda.matmul.allow_tf32 = flags["cuda.matmul.allow_tf32"]
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = flags["cuda.matmul.allow_fp16_reduced_precision_reduction"]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = flags["cuda.matmul.allow_bf16_reduced_precision_reduction"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn.allow_tf32"]
    torch.backends.cudnn.benchmark = flags["cudnn.benchmark"]
    torch.backends.cudnn.deterministic = flags["cudnn.deterministic"]
    torch.backends.cudnn.enabled = flags["cudnn.enabled"]


#: aten ops that move, view or allocate memory without computing: a candidate's forward may
#: call these through torch. Every other aten op in its forward is compute done by torch.
#: (resolve_conj and resolve_neg return a real tensor itself: `.numpy()` calls them.)
#: Joining, padding with a constant, flipping, rolling and repeating move bytes as
#: ``copy_`` into slices of one buffer would (a published exclusive cumsum shifts its
#: kernel's scan with ``torch.cat``; a conv kernel pads its input with ``F.pad``); the
#: composite spellings (``hstack``, ``pad``, ``tile``, ...) are named for the profiler,
#: which sees them above the op they become.
NON_COMPUTE_OPS = frozenset(
    f"aten::{name}"
    for name in (
        "empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like zero_ ones ones_like "
        "full full_like fill_ new_zeros new_ones new_full arange "
        "view view_as reshape _reshape_alias _unsafe_view as_strided contiguous clone copy_ _to_copy to "
        "lift_fresh lift_fresh_copy detach detach_ alias t transpose permute expand expand_as select slice unsqueeze "
        "squeeze flatten unflatten unbind split split_with_sizes chunk narrow movedim size stride "
        "numel set_ resize_ _local_scalar_dense item is_nonzero result_type _has_compatible_shallow_copy_type "
        "record_stream resolve_conj resolve_neg "
        "cat concat concatenate stack hstack vstack dstack column_stack constant_pad_nd pad flip fliplr flipud "
        "roll repeat tile "
        # In-place and composite spellings of views (the profiler names the composite;
        # ``x.T`` is ``numpy_T``), and im2col (``F.unfold``: a conv's patches gathered into
        # columns for a kernel's GEMM, moved as a strided copy would).
        "unsqueeze_ squeeze_ t_ transpose_ swapaxes swapaxes_ swapdims swapdims_ moveaxis numpy_T mT ravel "
        "reshape_as type_as as_strided_ resize_as_ unfold diagonal view_as_real view_as_complex tensor_split "
        "unsafe_split unsafe_split_with_sizes unsafe_chunk hsplit vsplit dsplit atleast_1d atleast_2d atleast_3d im2col "
        # A vector placed on a matrix's diagonal, zeros elsewhere (a diagonal matmul written
        # as the problem states it: ``torch.diag(A)`` and a kernel's product).
        "diag diag_embed diagflat "
        # Random numbers drawn into memory of a shape (KernelBench level 3's LSTMs draw
        # their initial states with ``torch.randn`` in forward): nothing read from an input.
        # Not ``normal`` or ``bernoulli`` with tensor arguments, which read them.
        "rand rand_like randn randn_like randint randint_like randperm normal_ uniform_ random_"
    ).split()
)


def torch_compute_ops(event_names: list[str]) -> list[str]:
    """The aten ops in a profiler trace that compute (outside :data:`NON_COMPUTE_OPS`)."""
    seen: dict[str, None] = {}
    for name in event_names:
        if name.startswith("aten::") and name not in NON_COMPUTE_OPS:
            seen.setdefault(name, None)
    return list(seen)


@attrs.define
class Profile:
    """What the profiler saw: aten op names, the CUDA kernels that ran (one name per
    launch, as the trace spells it) and the CUDA streams they ran on."""

    op_names: list[str] = attrs.field(factory=list)
    kernel_streams: set[int] = attrs.field(factory=set)
    kernel_names: list[str] = attrs.field(factory=list)


@attrs.define
class _Recording:
    """One :func:`profiled` block that is open: where its events go."""

    profile: Profile
    on_gpu: bool
    trace_path: Path


#: The :func:`profiled` blocks open in this process, outermost first.
_open_recordings: list[_Recording] = []
#: The torch profiler recording for them now (one at a time: torch cannot nest them).
_session: list[Any] = []


def _start_session() -> None:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if any(recording.on_gpu for recording in _open_recordings):
        activities.append(ProfilerActivity.CUDA)
    session = profile(activities=activities)
    with _inductor_not_imported():
        session.__enter__()
    _session.append(session)


@contextlib.contextmanager
def _inductor_not_imported() -> Iterator[None]:
    """While torch.profiler starts: ``hasattr(torch, "_inductor")`` (its check for Inductor's
    CUDA graphs) imports torch._inductor, and Dynamo with it, through torch's lazy
    submodules: 2.4-4 s of CPU in every fresh worker that profiles. Where Inductor is not
    imported nothing of it can run, so the check is answered "no" without importing it."""
    lazy = getattr(torch, "_lazy_modules", None)
    hide = isinstance(lazy, set) and "_inductor" in lazy and "torch._inductor" not in sys.modules
    if hide:
        lazy.discard("_inductor")
    try:
        yield
    finally:
        if hide:
            lazy.add("_inductor")


def _stop_session() -> None:
    """Stop the running torch profiler and give what it saw to every open block."""
    session = _session.pop()
    session.__exit__(None, None, None)
    op_names = [event.name for event in session.events()]
    streams: set[int] = set()
    kernels: list[str] = []
    innermost = _open_recordings[-1]
    if any(recording.on_gpu for recording in _open_recordings):
        session.export_chrome_trace(str(innermost.trace_path))
        try:
            trace = json.loads(innermost.trace_path.read_text())
            for event in trace.get("traceEvents", []):
                if event.get("cat") == "kernel":
                    kernels.append(str(event.get("name", "")))
                    if "stream" in event.get("args", {}):
                        streams.add(int(event["args"]["stream"]))
        finally:
            innermost.trace_path.unlink(missing_ok=True)
    for recording in _open_recordings:
        recording.profile.op_names += op_names
        recording.profile.kernel_names += kernels
        recording.profile.kernel_streams |= streams


@contextlib.contextmanager
def profiled(device: str, trace_path: Path) -> Iterator[Profile]:
    """Profile the enclosed code; the yielded :class:`Profile` is filled on exit.

    Kernel names and streams come from the Chrome trace (``kernel`` events), written to
    ``trace_path`` and removed again. Blocks nest: torch runs one profiler at a time, so
    an inner block stops the outer one's profiler, records its own code, and starts it
    again; the outer block sees everything, the inner block its own part. (A backend
    proving launches from a trace profiles inside the evaluator's profiled call.)
    """
    result = Profile()
    if _session:
        _stop_session()
    _open_recordings.append(_Recording(result, device.startswith("cuda"), trace_path))
    try:
        _start_session()
        yield result
    finally:
        try:
            if _session:
                _stop_session()
        finally:
            _open_recordings.pop()
            if _open_recordings:
                _start_session()


CUDA_FATAL_MARKERS = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "misaligned address",
    "CUDA error",
    "cudaErrorLaunchFailure",
    "an illegal instruction",
)


def is_fatal_cuda_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the process's CUDA context is unusable."""
    message = f"{type(exc).__name__}: {exc}"
    return any(marker in message for marker in CUDA_FATAL_MARKERS)


def error_reply(stage: str, exc: BaseException) -> dict[str, Any]:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    message = f"{type(exc).__name__}: {exc}"
    return {
        "ok": False,
        "stage": stage,
        "error": type(exc).__name__,
        "message": message[:2000],
        "traceback": text[-6000:],
        "cuda_error": is_fatal_cuda_error(exc),
    }


def output_meta(value: Any) -> dict[str, Any]:
    """Type, dtype, shape and size of one output, without its data."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"type": type(value).__name__, "dtype": str(value.dtype), "shape": list(value.shape), "nbytes": value.nbytes}
    return {"type": type(value).__name__, "dtype": "", "shape": [], "nbytes": 0}


def set_cpu_budget(seconds: int) -> None:
    """Allow ``seconds`` more CPU time from now (SIGXCPU ends the process beyond it)."""
    if seconds <= 0:
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    total = int(used.ru_utime + used.ru_stime) + seconds
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (total if hard == resource.RLIM_INFINITY else min(total, hard), hard))


#: Value distributions the fuzzer draws inputs from (see :func:`fuzz_inputs`).
DISTRIBUTIONS = ("default", "uniform", "heavy_tailed", "large", "small", "zeros", "sparse_zeros")
#: Memory layouts of the inputs: the same values, other strides.
LAYOUTS = ("contiguous", "transposed", "sliced")


def _redistribute(value: torch.Tensor, distribution: str, generator: torch.Generator) -> torch.Tensor:
    """The same shape with values from ``distribution``; inputs that were all non-negative
    stay non-negative (a problem may need them so: logarithms, probabilities)."""
    if distribution == "default":
        return value
    shape, device, dtype = value.shape, value.device, value.dtype
    non_negative = bool((value >= 0).all()) if value.numel() else False
    if distribution == "uniform":
        fresh = torch.rand(shape, generator=generator) * 2 - 1
    elif distribution == "heavy_tailed":  # Cauchy, clipped so that float16 can hold it
        fresh = torch.tan(torch.pi * (torch.rand(shape, generator=generator) - 0.5)).clamp(-6e4, 6e4)
    elif distribution == "large":
        fresh = value.detach().to("cpu", torch.float64) * 1e3
    elif distribution == "small":
        fresh = value.detach().to("cpu", torch.float64) * 1e-3
    elif distribution == "zeros":
        fresh = torch.zeros(shape)
    elif distribution == "sparse_zeros":
        fresh = value.detach().to("cpu", torch.float64) * (torch.rand(shape, generator=generator) < 0.5)
    else:
        raise ValueError(f"unknown distribution {distribution!r}: use one of {', '.join(DISTRIBUTIONS)}")
    if non_negative:
        fresh = fresh.abs()
    return fresh.to(device=device, dtype=dtype)


def _relayout(value: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values and shape in a non-contiguous layout."""
    if layout == "contiguous" or value.dim() == 0 or value.numel() == 0:
        return value
    if layout == "transposed" and value.dim() >= 2:
        return value.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout in ("transposed", "sliced"):
        wide = torch.empty(*value.shape[:-1], value.shape[-1] * 2, dtype=value.dtype, device=value.device)
        view = wide[..., ::2]
        view.copy_(value)
        return view
    raise ValueError(f"unknown layout {layout!r}: use one of {', '.join(LAYOUTS)}")


def fuzz_inputs(problem_module: types.ModuleType, example: dict[str, Any], device: str) -> list[Any]:
    """Inputs for one fuzz example: ``get_inputs()`` under the example's seed, then its
    value distribution, dtype and layout applied to every floating-point tensor. The same
    example gives the same inputs in any process."""
    inputs = make_inputs(problem_module, example["seed"], device)
    generator = torch.Generator().manual_seed(example["seed"] % (2**63))
    result = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            value = _redistribute(value, example["distribution"], generator)
            if example.get("dtype"):
                value = value.to(getattr(torch, example["dtype"]))
            value = _relayout(value, example["layout"])
        result.append(value)
    return result
