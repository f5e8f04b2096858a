"""Read candidate and problem sources as syntax trees, never as running code.

Helpers the static checks of the core and of backend plugins share: parsing with a
reported error, dotted names of expressions, string constants, decorators, calls. Nothing
here imports or executes the source it reads.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterator

#: CPython 3.11's ``ast.parse`` is not safe in threads: two at once can raise
#: ``SystemError: AST constructor recursion depth mismatch``, and the evaluator runs static
#: checks on several candidates in threads. Every parse in the trusted process takes it.
AST_LOCK = threading.Lock()


def parse_tree(code: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` under :data:`AST_LOCK`; raises ``SyntaxError``/``ValueError`` as it does."""
    with AST_LOCK:
        return ast.parse(code, filename)


def parse(code: str) -> ast.Module | None:
    """The module's syntax tree, or None when it does not parse."""
    try:
        return parse_tree(code)
    except (SyntaxError, ValueError):
        return None


def dotted_name(node: ast.AST) -> str:
    """``triton.jit`` for ``triton.jit``, ``jit`` for ``jit``, the callee for a call; else ''."""
    if isinstance(node, ast.Call):
        return dotted_name(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def string_constants(tree: ast.AST) -> Iterator[ast.Constant]:
    """Every string literal in the tree (f-string parts included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node


def functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
