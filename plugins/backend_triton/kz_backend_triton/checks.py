"""Static checks of Triton candidates: read the source's syntax tree, run nothing.

- ``no_triton_kernel`` (error): the source defines no ``@triton.jit`` function (decorated,
  or a module-level function given to ``k = triton.jit(fn)``), so it cannot be a Triton
  solution, whatever it computes.
- ``kernel_not_launched`` (warning): a kernel is defined but the source has no
  ``kernel[grid](...)`` launch of it, no call from another kernel and no mention at all
  (a ``tl.associative_scan`` combine function, a kernel chosen into a variable). Launches made
  through an alias are legal Python, so this is only a warning; the evaluator's launch
  count is the proof that decides.
"""

from __future__ import annotations

import ast

from kz_core import Finding, Severity, dotted_name, parse_source as parse, source_functions as functions

#: Decorators that make a function a Triton kernel (``@triton.jit``, ``@jit``, with or
#: without arguments); ``autotune`` and ``heuristics`` wrap a jit function.
JIT_DECORATORS = {"triton.jit", "jit", "tl.jit", "triton.language.jit"}


#: Wrappers of a jit function: ``triton.autotune(...)(triton.jit(fn))``.
TUNING = {"triton.autotune", "autotune", "triton.heuristics", "heuristics"}


def jit_assigned_names(tree: ast.Module) -> set[str]:
    """Functions made kernels by a module-level ``k = triton.jit(fn)`` (or
    ``triton.jit(**options)(fn)``, maybe inside ``triton.autotune(...)(...)`` or
    ``triton.heuristics(...)(...)``): the names given to jit."""
    names = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Call) and dotted_name(value.func.func) in TUNING and len(value.args) == 1:
            value = value.args[0]
        if not isinstance(value, ast.Call):
            continue
        jit = value.func.func if isinstance(value.func, ast.Call) else value.func
        if dotted_name(jit) in JIT_DECORATORS and len(value.args) == 1 and isinstance(value.args[0], ast.Name):
            names.add(value.args[0].id)
    return names


def triton_kernels(tree: ast.Module) -> list[ast.FunctionDef]:
    """Functions decorated with ``@triton.jit`` (in any of its spellings), and module-level
    functions given to ``triton.jit(fn)`` (the trusted extraction checks both alike)."""
    assigned = jit_assigned_names(tree)
    return [
        fn
        for fn in functions(tree)
        if isinstance(fn, ast.FunctionDef)
        and (any(dotted_name(d) in JIT_DECORATORS for d in fn.decorator_list) or fn.name in assigned)
    ]


def launched_names(tree: ast.Module) -> set[str]:
    """Names launched as ``name[grid](...)`` anywhere in the module."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            name = dotted_name(node.func.value)
            if name:
                names.add(name.rsplit(".", 1)[-1])
    return names


def called_from_kernels(kernels: list[ast.FunctionDef]) -> set[str]:
    """Names called inside kernel bodies (device functions called by a kernel)."""
    return {
        dotted_name(node.func).rsplit(".", 1)[-1]
        for kernel in kernels
        for node in ast.walk(kernel)
        if isinstance(node, ast.Call) and dotted_name(node.func)
    }


def mentioned_names(tree: ast.Module) -> set[str]:
    """Names read anywhere in the module (``kernel = safe if big else fast`` before
    ``kernel[grid](...)``, a table of kernels, a combine function given to
    ``tl.associative_scan``): a kernel named so is used, not dead."""
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


def check_triton_source(code: str) -> list[Finding]:
    """Findings for one Triton candidate's source (empty when it does not parse: the core
    reports syntax errors once, as a format error)."""
    tree = parse(code)
    if tree is None:
        return []
    kernels = triton_kernels(tree)
    if not kernels:
        return [
            Finding(
                check="no_triton_kernel",
                message="no @triton.jit kernel is defined: a Triton candidate must compute with its own Triton kernels",
            )
        ]
    used = launched_names(tree) | called_from_kernels(kernels) | mentioned_names(tree)
    return [
        Finding(
            check="kernel_not_launched",
            message=f"Triton kernel {kernel.name!r} is defined but never launched as {kernel.name}[grid](...)",
            severity=Severity.WARNING,
            line=kernel.lineno,
        )
        for kernel in kernels
        if kernel.name not in used
    ]
