"""Size variations of a problem: the same module with its size constants rebound.

KernelBench-format problems set their sizes as module-level integer constants that
``get_inputs`` and ``get_init_inputs`` read (``batch_size = 16``, ``N = 2048 * 2``). A
kernel that hard-codes those sizes passes every trial at the default size; one trial at
other sizes catches it. The other sizes keep the alignment the default ones have (up to
16 elements), which honest kernels may rely on. :func:`size_variations` proposes
rebindings of the constants the inputs are made from (not the module's configuration),
most aggressive first (every constant at once, then one constant at a time); the
reference worker uses the first one its reference accepts.

Reads the problem's syntax tree only; never runs it.
"""

from __future__ import annotations

import ast
import operator

from kz_core.source import parse_tree

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}


def _integer_value(node: ast.AST) -> int | None:
    """The value of an integer literal or of arithmetic on integer literals, else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _integer_value(node.left), _integer_value(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Pow) and abs(right) > 64):
            return None
        try:
            return _OPERATORS[type(node.op)](left, right)
        except ZeroDivisionError:
            return None
    return None


def size_constants(code: str) -> dict[str, int]:
    """Module-level names bound once to an integer of at least 2 (sizes, not flags)."""
    try:
        tree = parse_tree(code)
    except SyntaxError:
        return {}
    bound: dict[str, list[int | None]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(_integer_value(node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            bound.setdefault(node.target.id, []).append(_integer_value(node.value))
    return {name: values[0] for name, values in bound.items() if len(values) == 1 and values[0] is not None and values[0] >= 2}


#: The most a varied size keeps of its value's alignment: 16 elements (the 16 bytes that
#: vector loads and TMA tensor descriptors need, for any dtype).
KEPT_ALIGNMENT = 16


def varied(value: int) -> int:
    """Another size near ``value``, so that a kernel hard-coding the default size fails:
    one more for sizes under 16, else about 6 % more and never a power of two, rounded to
    keep the alignment ``value`` has (its largest power-of-two divisor, up to 16 elements
    and a sixteenth of ``value``). A kernel may rely on the alignment the problem's sizes
    give it (``float4`` loads, TMA descriptors' 16-byte strides); before, every large
    varied size was odd and such honest kernels failed the variation.
    """
    if value < 16:
        return value + 1
    step = min(value & -value, KEPT_ALIGNMENT, 1 << ((value // 16).bit_length() - 1))
    candidate = value + -(-(value // 16) // step) * step
    while candidate & (candidate - 1) == 0:  # a power of two
        candidate += step
    return candidate


def input_size_constants(code: str) -> dict[str, int]:
    """The size constants the problem's inputs are made from: those ``get_inputs`` reads,
    directly or through module-level names and functions it uses (``batch_size``,
    ``in_channels``). The others (``kernel_size``, ``stride``, ``out_channels``) only
    configure the module, fixed when it is built. Every size constant when ``get_inputs``
    reads none (or is not a module-level function)."""
    constants = size_constants(code)
    try:
        tree = parse_tree(code)
    except SyntaxError:
        return constants
    definitions: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            definitions.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        definitions.setdefault(name.id, []).append(node.value)
    if "get_inputs" not in definitions:
        return constants
    read: set[str] = set()
    pending = ["get_inputs"]
    while pending:
        name = pending.pop()
        if name in read:
            continue
        read.add(name)
        for definition in definitions.get(name, []):
            pending += [n.id for n in ast.walk(definition) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    used = {name: value for name, value in constants.items() if name in read}
    return used or constants


def size_variations(code: str) -> list[dict[str, int]]:
    """Rebindings to try, in order: every size constant the inputs are made from varied,
    then each one alone. A module's configuration (a convolution's ``kernel_size``,
    ``stride``, ``out_channels``) stays: a kernel may be built for the module it is given,
    as cuDNN picks an algorithm per configuration, but not for one batch of inputs."""
    constants = input_size_constants(code)
    if not constants:
        return []
    every = {name: varied(value) for name, value in constants.items()}
    singles = [{name: varied(value)} for name, value in constants.items()]
    return [every] + (singles if len(singles) > 1 else [])
