"""Compiling CUDA C++ to a cubin with NVRTC (through ``cuda.core``), with a disk cache.

NVRTC runs on the CPU: sources compile on a machine without a GPU, for the GPU's
architecture when there is one and for ``KZ_CUDA_ARCH`` (default ``sm_90``) otherwise.
Cubins are cached under the kz cache folder by a hash of the source, the options, the
architecture and the NVRTC version, so a source compiles once per machine. Compiler
errors raise :class:`CudaCompileError` with NVRTC's log and the first error's line.

This module compiles; it never loads or launches a kernel.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any

import attrs

from kz_core import cache_dir, replace_file

#: Architecture used when no GPU is visible (NVRTC needs a target).
DEFAULT_ARCH = "sm_90"
ARCH_ENV = "KZ_CUDA_ARCH"
#: The name NVRTC gives the source in its log: ``kernel.cu(12): error: ...``.
SOURCE_NAME = "kernel.cu"
_ERROR_LINE = re.compile(re.escape(SOURCE_NAME) + r"\((\d+)\): (?:catastrophic )?error")


class CudaCompileError(RuntimeError):
    """NVRTC rejected the source.

    :ivar log: NVRTC's full log.
    :ivar line: the first error's line in the CUDA source (1-based), when the log says.
    :ivar source: the CUDA source that failed.
    """

    def __init__(self, message: str, log: str, line: int | None, source: str = ""):
        super().__init__(message)
        self.log = log
        self.line = line
        self.source = source


@attrs.frozen
class CompiledSource:
    """A cubin and how it was made."""

    cubin: bytes
    arch: str
    options: tuple[tuple[str, str], ...]
    cached: bool
    seconds: float


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def current_arch() -> str:
    """``sm_XY`` of the current GPU, else ``$KZ_CUDA_ARCH``, else :data:`DEFAULT_ARCH`."""
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"sm_{major}{minor}"
    except ImportError:  # pragma: no cover - torch is a dependency of kz-core
        pass
    return os.environ.get(ARCH_ENV, DEFAULT_ARCH)


def _cache_path(source: str, options: tuple[tuple[str, str], ...], arch: str) -> Path:
    parts = [source, *(f"{k}={v}" for k, v in options), arch, nvrtc_version()]
    key = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return cache_dir() / "nvrtc" / f"{key}.cubin"


#: NVRTC options that read or write files: kz compiles CUDA from the source text alone (in
#: the trusted executor too, where a plan's options could otherwise pull in any readable file).
FILE_OPTIONS = frozenset(
    {"include_path", "pre_include", "pch", "create_pch", "use_pch", "pch_dir", "time", "fdevice_time_trace", "extra_sources", "name"}
)


def compile_source(source: str, options: dict[str, Any] | None = None, arch: str | None = None, use_cache: bool = True) -> CompiledSource:
    """Compile ``source`` to a cubin (from the cache when it was compiled before).

    :param options: ``cuda.core.ProgramOptions`` fields, e.g. ``{"use_fast_math": True}``.
    :param arch: ``sm_XY``; None: :func:`current_arch`.
    :raises CudaCompileError: with NVRTC's log when the source does not compile.
    """
    from cuda.core import Program, ProgramOptions

    arch = arch or current_arch()
    refused = sorted(FILE_OPTIONS & set(options or {}))
    if refused:
        message = f"NVRTC option{'s' if len(refused) > 1 else ''} {', '.join(refused)} read or write files; kz compiles CUDA from the source text alone"
        raise CudaCompileError(message, message, None, source)
    settings = {"std": "c++17", **(options or {})}
    key = tuple(sorted((str(k), repr(v)) for k, v in settings.items()))
    started = time.perf_counter()
    path = _cache_path(source, key, arch)
    if use_cache and path.is_file():
        return CompiledSource(path.read_bytes(), arch, key, True, time.perf_counter() - started)
    try:
        program_options = ProgramOptions(name=SOURCE_NAME, arch=arch, **settings)
    except TypeError as exc:
        raise CudaCompileError(f"unknown NVRTC option: {exc}", str(exc), None, source) from exc
    try:
        cubin = Program(source, "c++", program_options).compile("cubin")
    except Exception as exc:  # cuda.core raises NVRTCError (a RuntimeError subclass)
        log = str(exc)
        match = _ERROR_LINE.search(log)
        errors = len(re.findall(r": (?:catastrophic )?error", log))
        summary = f"NVRTC: {errors or 'compilation'} error{'s' if errors != 1 else ''}"
        raise CudaCompileError(summary, log, int(match.group(1)) if match else None, source) from exc
    data = bytes(cubin.code)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data)
    return CompiledSource(data, arch, key, False, time.perf_counter() - started)
