"""Proof of launch for ``cuda_inline`` candidates: their kernels, found in profiler traces.

An extension built with ``load_inline`` launches kernels with ``<<<...>>>`` from C++, out
of reach of any Python launch path, so the proof is the torch profiler's CUDA trace of
each forward call: a launch counts when a kernel event's name is one of the ``__global__``
functions the candidate's CUDA sources declare (:func:`declared_kernels`,
:func:`count_declared_launches`). Kernels of torch's own namespaces (``at::``, ``c10::``,
``torch::``) never count, whatever they are called.

Each traced call also launches :data:`MARKER_KERNEL`, a kz kernel on torch's current
stream, so the evaluator's stream guard sees a second stream whenever the candidate's
kernels run on a stream of their own (``at::cuda::getStreamFromPool()``, say).

Used inside evaluation workers only.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: Namespaces of kernels that are torch's, never a candidate's.
LIBRARY_NAMESPACES = frozenset({"at", "c10", "torch"})
#: The kz kernel launched on torch's current stream at the start of every traced call.
MARKER_KERNEL = "kz_current_stream_marker"
_MARKER_SOURCE = f'extern "C" __global__ void {MARKER_KERNEL}() {{}}\n'

_GLOBAL = re.compile(r"\b__global__\b")
_LAUNCH_BOUNDS = re.compile(r"\s*__launch_bounds__\s*\(")


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", " ", source)


def declared_kernels(cuda_source: str) -> list[str]:
    """Names of the ``__global__`` functions defined or declared in ``cuda_source``, in order.

    Reads ``[template <...>] [extern "C"] [static] __global__ void [__launch_bounds__(...)]
    name(`` in any order of the qualifiers.
    """
    source = _strip_comments(cuda_source)
    names: list[str] = []
    for match in _GLOBAL.finditer(source):
        rest = source[match.end() :]
        head = ""
        while True:
            bounds = _LAUNCH_BOUNDS.search(rest)
            paren = rest.find("(")
            if paren < 0:
                break
            if bounds is not None and bounds.end() - 1 == paren:
                head += rest[: bounds.start()]
                depth, index = 0, paren
                for index in range(paren, len(rest)):
                    depth += {"(": 1, ")": -1}.get(rest[index], 0)
                    if depth == 0:
                        break
                rest = rest[index + 1 :]
                continue
            head += rest[:paren]
            break
        identifiers = re.findall(r"[A-Za-z_]\w*", head)
        if identifiers and identifiers[-1] not in names:
            names.append(identifiers[-1])
    return names


def _mangled_parts(name: str) -> list[str]:
    """The name components of an Itanium-mangled function name (``_ZN2ns6kernelEPf``)."""
    rest = name[2:]
    rest = rest[1:] if rest.startswith("L") else rest
    nested = rest.startswith("N")
    if nested:
        rest = rest[1:].lstrip("rVK")
    parts: list[str] = []
    while rest[:1].isdigit():
        digits = re.match(r"\d+", rest).group(0)  # type: ignore[union-attr]
        length = int(digits)
        parts.append(rest[len(digits) : len(digits) + length])
        rest = rest[len(digits) + length :]
        if not nested or rest[:1] in ("I", "E", ""):
            break
    return ["" if part.startswith("_GLOBAL__N") else part for part in parts]


def kernel_name_parts(trace_name: str) -> list[str]:
    """The qualified name of a kernel as a profiler trace spells it, as components:
    ``void ns::scale<float>(float*, int)`` gives ``["ns", "scale"]``, ``add_kernel`` gives
    ``["add_kernel"]``; mangled names (``_Z10add_kernelPfi``) are read too."""
    name = trace_name.strip()
    if name.startswith("_Z"):
        return [part for part in _mangled_parts(name) if part] or [name]
    name = name.replace("(anonymous namespace)::", "")
    depth, cut = 0, len(name)
    for index, char in enumerate(name):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0:
            cut = index
            break
    name = name[:cut].strip()
    if name.endswith(">"):  # template arguments of the kernel itself
        depth = 0
        for index in range(len(name) - 1, -1, -1):
            depth += {">": 1, "<": -1}.get(name[index], 0)
            if depth == 0:
                name = name[:index].strip()
                break
    tokens = name.split()
    qualified = tokens[-1] if tokens else name  # drop the return type ("void")
    return [part for part in qualified.split("::") if part] or [qualified]


def count_declared_launches(trace_kernels: Iterable[str], declared: Sequence[str]) -> Counter[str]:
    """Launches of ``declared`` kernels among a trace's kernel events, by declared name.

    :param trace_kernels: the names of the trace's kernel events, one per launch.
    :param declared: the kernel names the candidate's CUDA sources declare.
    """
    wanted = set(declared) - {MARKER_KERNEL}
    launches: Counter[str] = Counter()
    for trace_name in trace_kernels:
        parts = kernel_name_parts(trace_name)
        if parts[-1] in wanted and (len(parts) == 1 or parts[0] not in LIBRARY_NAMESPACES):
            launches[parts[-1]] += 1
    return launches


_marker: list[Any] = []


def mark_current_stream() -> None:
    """Launch :data:`MARKER_KERNEL` (an empty kernel) on torch's current stream."""
    if not _marker:
        from kz_backend_cuda.api import load_cuda

        _marker.append(load_cuda(_MARKER_SOURCE)[MARKER_KERNEL])
    _marker[0][1, 1]()


def traced_call(model: Any, inputs: list[Any]) -> tuple[Any, list[str]]:
    """``model(*inputs)`` under the profiler: its outputs, and the names of the kernels in
    the call's CUDA trace, one per launch (the device is synchronised before it ends)."""
    import torch

    from kz_core import profiled

    from kz_backend_cuda.api import CudaUnavailableError

    if not torch.cuda.is_available():
        raise CudaUnavailableError("cuda_inline kernels run on a GPU only; there is none here")
    device = f"cuda:{torch.cuda.current_device()}"
    trace_path = Path(tempfile.gettempdir()) / f"kz-inline-trace-{os.getpid()}.json"
    with profiled(device, trace_path) as seen:
        mark_current_stream()
        outputs = model(*inputs)
        torch.cuda.synchronize()
    return outputs, seen.kernel_names
