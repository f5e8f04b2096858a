"""What a problem source is, and how a problem's source text is validated.

A :class:`ProblemSource` turns a ``problems.source`` string into problems. Validation reads
the text with ``ast`` only: listing or filtering problems never executes their code (a
malformed or hostile file cannot do anything by being listed).
"""

from __future__ import annotations

import abc
import ast
from collections.abc import Iterator

from kz_core.errors import KzError
from kz_core.model import Problem, ProblemError
from kz_core.source import parse_tree

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")


class ProblemSource(abc.ABC):
    """A loader for one kind of problem set, registered through ``register_problem_sources``.

    Subclasses set ``name`` and ``description`` and implement :meth:`accepts` and
    :meth:`load`.
    """

    #: Short unique name shown by ``kz plugins`` (``directory``, ``jsonl``, ``hf``, ...).
    name: str = ""
    #: One line saying which ``problems.source`` strings it understands.
    description: str = ""

    @abc.abstractmethod
    def accepts(self, spec: str) -> bool:
        """Whether this source understands ``spec`` (a path, ``hf:ID``, a keyword)."""

    @abc.abstractmethod
    def load(self, spec: str) -> Iterator[Problem | ProblemError]:
        """Yield every problem in ``spec``; entries that cannot load yield a ProblemError.

        Raise :class:`ProblemSourceError` only when the whole source is unusable (the file
        does not exist, the dataset cannot be reached), with a message saying what to do.
        """


class ProblemSourceError(KzError):
    """A whole problem source is unusable; the message says what to do."""


def validate_problem_code(code: str) -> str | None:
    """Why ``code`` is not a KernelBench-format problem, or None when it is.

    Checks, without running anything: it parses; it defines ``class Model`` and the
    functions ``get_inputs`` and ``get_init_inputs`` at module level.
    """
    try:
        tree = parse_tree(code)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # e.g. source with NUL bytes
        return f"cannot be parsed: {exc}"
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    # `get_inputs = ...` assignments count too (some files alias a function).
    assigned = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    missing = []
    if "Model" not in classes and "Model" not in assigned:
        missing.append("class Model")
    missing += [f"def {fn}()" for fn in REQUIRED_FUNCTIONS if fn not in functions and fn not in assigned]
    if missing:
        return "no module-level " + ", no ".join(missing)
    return None


def make_problem(
    name: str, code: str, *, level: int | None = None, problem_id: int | None = None, source: str = ""
) -> Problem | ProblemError:
    """A :class:`Problem` when ``code`` validates, else a :class:`ProblemError` saying why."""
    reason = validate_problem_code(code)
    if reason is not None:
        return ProblemError(name=name, reason=reason, source=source)
    return Problem(name=name, code=code, level=level, problem_id=problem_id, source=source)
