"""Static checks of Triton candidates: read the source's syntax tree, run nothing.

- ``no_triton_kernel`` (error): the source defines no ``@triton.jit`` function (decorated,
  in any import alias or ``jit = triton.jit`` alias, or a module-level function given to
  ``triton.jit(fn)``: ``k = triton.jit(fn)``, a class attribute, an item of a table), so it
  cannot be a Triton solution, whatever it computes. Where this reading finds none, the
  trusted extraction's reading (:mod:`.trusted`) is asked too: a source whose kernels it
  would build is never refused here.
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


def _spellings(tree: ast.Module) -> set[str]:
    """The spellings of ``triton.jit`` in this source, as the trusted extraction resolves
    them: the fixed ones, import aliases (``import triton as tr`` -> ``tr.jit``; ``from
    triton import jit as triton_jit``) and module-level plain aliases (``jit = triton.jit``)."""
    jit = set(JIT_DECORATORS)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            jit.update(f"{alias.asname}.jit" for alias in node.names if alias.asname and alias.name in ("triton", "triton.language"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "triton":
            jit.update(alias.asname or alias.name for alias in node.names if alias.name == "jit")
    for stmt in tree.body:  # in order: ``jit = triton.jit`` then ``my_jit = jit``
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if isinstance(stmt.value, (ast.Name, ast.Attribute)) and dotted_name(stmt.value) in jit:
                jit.add(stmt.targets[0].id)
    return jit


def jit_assigned_names(tree: ast.Module, jit: set[str]) -> set[str]:
    """Functions made kernels by ``triton.jit(fn)`` (or ``triton.jit(**options)(fn)``, maybe
    inside ``triton.autotune(...)(...)`` or ``triton.heuristics(...)(...)``) in a module-level
    ``k = ...``, a class attribute or an item of a literal table: the names given to jit
    (in any of its ``jit`` spellings)."""
    names = set()
    for value in ast.walk(tree):
        if not isinstance(value, ast.Call) or len(value.args) != 1 or not isinstance(value.args[0], ast.Name):
            continue
        func = value.func.func if isinstance(value.func, ast.Call) else value.func
        if dotted_name(func) in jit:
            names.add(value.args[0].id)
    return names


def triton_kernels(tree: ast.Module) -> list[ast.FunctionDef]:
    """Functions decorated with ``@triton.jit`` (in any of its spellings), and module-level
    functions given to ``triton.jit(fn)`` (the trusted extraction checks both alike). Where
    none is found this way, the trusted extraction's own reading of the source decides."""
    jit = _spellings(tree)
    assigned = jit_assigned_names(tree, jit)
    found = [
        fn
        for fn in functions(tree)
        if isinstance(fn, ast.FunctionDef)
        and (any(dotted_name(d) in jit for d in fn.decorator_list) or fn.name in assigned)
    ]
    return found or _trusted_kernels(tree)


def _trusted_kernels(tree: ast.Module) -> list[ast.FunctionDef]:
    """The kernels :mod:`.trusted` would build from ``tree`` (read, never run), or none
    where it refuses the source or Triton cannot be imported."""
    try:
        from .trusted import _Source

        return [fdef for fdef, _ in _Source(tree).kernels.values()]
    except Exception:  # noqa: BLE001 - refused, or no Triton here: no kernel that way
        return []


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


def _other_backend(code: str) -> str:
    """A hint where a candidate judged as Triton (``eval.backend`` defaults to it) is
    another backend's: ``kz eval -c`` of a folder of ``load_inline`` candidates without
    ``--backend`` rejected every one as having no Triton kernel, and said no more."""
    if "load_inline" in code:
        return " (this source builds C++/CUDA with load_inline: evaluate it with --backend cuda_inline, eval.backend=cuda_inline)"
    if "__global__" in code:
        return " (this source has CUDA kernels: evaluate it with --backend cuda, eval.backend=cuda)"
    return ""


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
                message="no @triton.jit kernel is defined: a Triton candidate must compute with its own Triton kernels" + _other_backend(code),
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
