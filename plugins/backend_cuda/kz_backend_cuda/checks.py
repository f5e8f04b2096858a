"""Static checks of CUDA candidates: read the source's syntax tree, run nothing.

- ``no_cuda_kernel`` (error): no string in the source defines a ``__global__`` function,
  so no CUDA kernel can ever launch.
- ``no_load_inline`` (error, backend ``cuda_inline``): the source never calls
  ``torch.utils.cpp_extension.load_inline``, which is how that format builds its kernels.
"""

from __future__ import annotations

import ast

from kz_core import Finding, dotted_name, parse_source as parse, string_constants

INLINE_BACKEND = "cuda_inline"


def defines_global_function(tree: ast.Module) -> bool:
    return any("__global__" in node.value for node in string_constants(tree))


def calls_load_inline(tree: ast.Module) -> bool:
    """Whether the source calls ``load_inline``: by that name (``cpp_extension.load_inline``,
    a module imported under any name) or by a name it imported or bound it as
    (``from torch.utils.cpp_extension import load_inline as _load_inline``)."""
    names = {"load_inline"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(alias.asname for alias in node.names if alias.name == "load_inline" and alias.asname)
        elif isinstance(node, ast.Assign) and not isinstance(node.value, ast.Call) and dotted_name(node.value).rsplit(".", 1)[-1] == "load_inline":
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return any(isinstance(node, ast.Call) and dotted_name(node.func).rsplit(".", 1)[-1] in names for node in ast.walk(tree))


def check_cuda_source(code: str, backend: str) -> list[Finding]:
    """Findings for one CUDA candidate's source (empty when it does not parse: the core
    reports syntax errors once, as a format error)."""
    tree = parse(code)
    if tree is None:
        return []
    findings = []
    if not defines_global_function(tree):
        findings.append(
            Finding(
                check="no_cuda_kernel",
                message="no __global__ function appears in the source's strings: a CUDA candidate must launch its own kernels",
            )
        )
    if backend == INLINE_BACKEND and not calls_load_inline(tree):
        findings.append(
            Finding(
                check="no_load_inline",
                message="backend cuda_inline builds kernels with torch.utils.cpp_extension.load_inline, which the source never calls",
            )
        )
    return findings
