"""Turning a model's reply into a candidate's source, or saying why it holds none.

The candidate is the last fenced Python block of the reply (```` ```python ```` or an
unlabelled fence); a reply without fences counts when it parses as Python on its own. A
fence the reply never closed (a reply cut off at the token limit) is used when what it
holds parses. Anything else is a ``format_error`` with the reason. Nothing is executed.
"""

from __future__ import annotations

import re

import attrs

from kz_core.source import parse_tree

_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n", re.MULTILINE)
PYTHON_LABELS = frozenset({"python", "py", "python3", ""})


@attrs.frozen
class ParsedReply:
    """The code found in a reply, or why there is none.

    :ivar code: the candidate's source, or None.
    :ivar reason: why there is no usable code (empty when there is).
    """

    code: str | None
    reason: str = ""


def _parses(code: str) -> str | None:
    try:
        parse_tree(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return str(exc)
    return None


def extract_code(reply: str) -> ParsedReply:
    """The candidate's source in ``reply`` (see the module docstring)."""
    blocks = [(label.lower(), body) for label, body in _FENCE.findall(reply)]
    python_blocks = [body for label, body in blocks if label in PYTHON_LABELS]
    last_closed_end = max((m.end() for m in _FENCE.finditer(reply)), default=0)
    unclosed = _OPEN_FENCE.search(reply, last_closed_end)
    if unclosed is not None and unclosed.group(1).lower() in PYTHON_LABELS:
        body = reply[unclosed.end() :]
        if body.strip() and _parses(body) is None:
            return ParsedReply(body)
        if not python_blocks:
            return ParsedReply(None, "the reply's code block is never closed (cut off at the token limit?) and does not parse")
    if python_blocks:
        code = python_blocks[-1]
        problem = _parses(code)
        if problem is not None:
            return ParsedReply(None, f"the last python code block does not parse ({problem})")
        if not code.strip():
            return ParsedReply(None, "the last python code block is empty")
        return ParsedReply(code)
    if blocks:
        labels = ", ".join(sorted({label or "unlabelled" for label, _ in blocks}))
        return ParsedReply(None, f"no python code block (the reply's blocks are: {labels})")
    if reply.strip() and _parses(reply) is None and re.search(r"^\s*(class|def|import|from)\b", reply, re.MULTILINE):
        return ParsedReply(reply)
    return ParsedReply(None, "no fenced python code block, and the reply is not Python on its own")
