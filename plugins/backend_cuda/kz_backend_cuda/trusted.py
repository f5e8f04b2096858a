"""The ``cuda`` backend's kernels for the trusted executor.

A recorded launch of the kz CUDA API names its kernel by the CUDA C++ source, the NVRTC
options and the kernel's name (``api.CudaModule.identity``). The executor compiles that
source itself with NVRTC (cached by source, options and architecture) and launches the
kernel through the same checked launch path, so a plan can only run kernels compiled from
source text: no cubin, library or host code of the candidate's. Runs in the executor only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kz_core import KernelCompileError, TrustedKernels


class NvrtcKernels(TrustedKernels):
    """Kernels compiled on first use from the sources that launches name."""

    backend = "cuda"

    def __init__(self) -> None:
        self._modules: dict[tuple[str, str, str], Any] = {}

    def _module(self, kernel: Mapping[str, Any]) -> Any:
        from kz_backend_cuda.api import load_cuda
        from kz_backend_cuda.nvrtc import CudaCompileError

        key = (str(kernel.get("source", "")), str(kernel.get("options", "{}")), str(kernel.get("arch", "")))
        if key not in self._modules:
            try:
                options = json.loads(key[1]) if key[1] else {}
                if not isinstance(options, dict):
                    raise ValueError("options must be a JSON object")
                self._modules[key] = load_cuda(key[0], options=options, arch=key[2] or None)
            except CudaCompileError as exc:
                raise KernelCompileError(f"{exc}\n{exc.log}" if exc.log and exc.log != str(exc) else str(exc)) from exc
        return self._modules[key]

    def launch(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        kernel = step["kernel"]
        module = self._module(kernel)
        block = options.get("block", [1, 1, 1])
        shared = options.get("shared_bytes", 0)
        module[str(kernel.get("name", ""))].launch(*args, grid=tuple(step["grid"]), block=tuple(block), shared_bytes=int(shared))

    def precompile(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        self._module(step["kernel"])  # NVRTC needs only the source

    def describe(self) -> list[str]:
        names = sorted({name for module in self._modules.values() for name in module.kernels})
        return [f"kernels: {', '.join(names)}"] if names else []
