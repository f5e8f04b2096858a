"""How alike two module sources are, after normalisation: the duplicate and contamination test.

A source is normalised by parsing it, dropping docstrings (comments never reach the AST),
renaming every identifier the author chose (variables, arguments, functions, classes,
``self.`` attributes) to a placeholder numbered by first appearance, and replacing numeric
literals by one placeholder (so other sizes or constants do not make a module new). What
stays is the structure and the torch APIs called (``torch.matmul``, ``F.gelu``, string
arguments such as einsum equations).

Two normalised sources are compared by the Jaccard similarity of their token n-grams
(:data:`NGRAM`-grams of AST node types in pre-order, an attribute node carrying its
attribute name so that ``torch.relu`` and ``torch.tanh`` differ); equal normalised sources
(the same hash) are 1.0. A source that does not parse has no fingerprint and is like
nothing. Pure Python on source text: nothing here runs the code.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable

import attrs

from kz_core.source import parse_tree

#: Length of the token n-grams compared.
NGRAM = 4
#: Names that keep their spelling: modules and builtins a module refers to, not its own.
KEPT_NAMES = frozenset({"torch", "nn", "F", "math", "np", "numpy", "self", "super", "range", "len", "int", "float", "list", "tuple"})


@attrs.frozen
class Fingerprint:
    """A normalised source: its hash and its set of token n-grams."""

    digest: str
    ngrams: frozenset[tuple[str, ...]]


class _Normaliser(ast.NodeTransformer):
    """Rename identifiers to placeholders, drop docstrings, blank out numbers."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def placeholder(self, name: str) -> str:
        if name in KEPT_NAMES:
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def _strip_docstring(self, node: ast.AST) -> None:
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]

    def visit_Module(self, node: ast.Module) -> ast.AST:
        self._strip_docstring(node)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self._strip_docstring(node)
        node.name = self.placeholder(node.name)
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self._strip_docstring(node)
        node.name = self.placeholder(node.name)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.placeholder(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.placeholder(node.arg)
        node.annotation = None
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self.placeholder(node.attr)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, (int, float, complex)) and not isinstance(node.value, bool):
            return ast.copy_location(ast.Constant(value=0), node)
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        # A bare string statement anywhere is a comment in disguise.
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        return self.generic_visit(node)


def _tokens(tree: ast.AST) -> list[str]:
    tokens = []
    for node in _preorder(tree):
        if isinstance(node, (ast.Load, ast.Store, ast.Del)):
            continue
        token = type(node).__name__
        if isinstance(node, ast.Attribute):
            token += "." + node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            token += ":" + node.value
        tokens.append(token)
    return tokens


def _preorder(node: ast.AST) -> Iterable[ast.AST]:
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _preorder(child)


def fingerprint(code: str) -> Fingerprint | None:
    """The normalised fingerprint of a source, or None when it does not parse."""
    try:
        tree = parse_tree(code)
    except (SyntaxError, ValueError):
        return None
    tree = _Normaliser().visit(tree)
    ast.fix_missing_locations(tree)
    digest = hashlib.sha256(ast.dump(tree, annotate_fields=False).encode("utf-8")).hexdigest()
    tokens = _tokens(tree)
    grams = frozenset(tuple(tokens[i : i + NGRAM]) for i in range(max(1, len(tokens) - NGRAM + 1)))
    return Fingerprint(digest, grams)


def similarity(a: Fingerprint | None, b: Fingerprint | None) -> float:
    """1.0 for equal normalised sources, else the Jaccard similarity of their n-grams (0..1)."""
    if a is None or b is None:
        return 0.0
    if a.digest == b.digest:
        return 1.0
    union = len(a.ngrams | b.ngrams)
    return len(a.ngrams & b.ngrams) / union if union else 0.0


def most_similar(target: Fingerprint | None, others: Iterable[tuple[str, Fingerprint | None]]) -> tuple[str, float]:
    """The name and similarity of the entry of ``others`` most like ``target`` (``("", 0.0)``: none)."""
    best_name, best = "", 0.0
    for name, other in others:
        value = similarity(target, other)
        if value > best:
            best_name, best = name, value
            if best >= 1.0:
                break
    return best_name, best
