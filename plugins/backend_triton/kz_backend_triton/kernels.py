"""The ``triton`` backend's kernels for the trusted executor.

``trusted.extract_kernels`` takes the ``@triton.jit`` functions out of the candidate's
syntax tree and builds them in a namespace of their own (Triton, its language module,
constants and each other), without running the candidate's module. A recorded launch
names its kernel by function name; the executor launches it here, through Triton's own
launcher (or its interpreter on a CPU), with the grid and the arguments that the plan
recorded. A plan that names a kernel the source does not define with ``@triton.jit``
(generated at run time, by torch.compile, by another library) cannot be replayed.
Runs in the executor only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kz_core import KernelCompileError, TrustedKernels


class ForeignKernel(RuntimeError):
    """A plan launched a Triton kernel that is not in the candidate's source."""

    check = "kernel_not_in_source"


class TritonKernels(TrustedKernels):
    """The candidate's ``@triton.jit`` kernels, by name."""

    backend = "triton"

    def __init__(self, kernels: Mapping[str, Any]):
        self.kernels = dict(kernels)

    def launch(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        from triton.compiler.errors import CompilationError

        name = str(step["kernel"].get("name", ""))
        kernel = self.kernels.get(name)
        if kernel is None:
            raise ForeignKernel(
                f"the forward launched a Triton kernel named {name!r} that the candidate's source does not define with @triton.jit "
                "(a kernel generated at run time, by torch.compile or by another library)"
            )
        try:
            kernel[tuple(step["grid"])](*args, **options)
        except CompilationError as exc:
            raise KernelCompileError(str(exc)) from exc

    def precompile(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        kernel = self.kernels.get(str(step["kernel"].get("name", "")))
        if kernel is not None and hasattr(kernel, "warmup"):
            kernel.warmup(*args, grid=tuple(step["grid"]), **options)

    def describe(self) -> list[str]:
        return [f"kernels: {', '.join(sorted(self.kernels)) or 'none'}"]
