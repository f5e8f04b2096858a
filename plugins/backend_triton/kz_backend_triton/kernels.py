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
        _set_scratch_allocator()

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


def _set_scratch_allocator() -> None:
    """Give Triton an allocator for kernels' global scratch memory (on a GPU, a kernel that
    makes tensor descriptors in its body, ``tl.make_tensor_descriptor``, needs one): the
    candidate's host code sets its own with ``triton.set_allocator``, and that code never
    runs in the executor. Allocations come from torch's caching allocator on the current
    device (inside a CUDA graph capture, from the graph's pool). Not under the interpreter,
    which needs none, nor on a Triton without ``set_allocator``."""
    import os

    import triton

    if os.environ.get("TRITON_INTERPRET") == "1" or not hasattr(triton, "set_allocator"):
        return
    import torch

    def allocate(size: int, alignment: int, stream: Any) -> Any:
        return torch.empty(size, dtype=torch.int8, device=torch.device("cuda", torch.cuda.current_device()))

    triton.set_allocator(allocate)
