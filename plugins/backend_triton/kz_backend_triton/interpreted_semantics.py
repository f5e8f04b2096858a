"""Pieces of Triton's language that its CPU interpreter runs as plain Python.

- ``a and b`` / ``a or b`` of tensors (FlagGems writes its masks so: ``mask =
  m[:, None] < M and n[None, :] < N``). The compiler makes an element-wise logical and;
  the interpreter ran Python's ``and``, which takes a block tensor as true and returns
  ``b`` alone: the row mask was lost, masked-off rows were loaded and stored out of
  bounds, and the worker's heap was corrupted (``worker_died``). :func:`install` gives
  the interpreter's source rewriter a ``visit_BoolOp``: where an operand is a tensor,
  every operand is evaluated and they are joined by ``logical_and`` / ``logical_or``, as
  compiled; other operands keep Python's short-circuit (a constexpr ``if A and B``).
- ``not mask`` of a tensor (red-team round 24 found an honest row sum written with
  ``inside = not (c >= C)``): compiled, an element-wise logical not (``tensor.__not__``);
  the interpreter ran Python's ``not``, which takes a block tensor as true and gives
  ``False``, so every column counted as outside. The rewriter's ``visit_UnaryOp`` sends
  ``not`` of a tensor to ``__not__``, as compiled; ``not`` of anything else is Python's.
- ``(cols < D) & (row < T)``, a block mask and a scalar test: see :func:`_bool_splat`.
- ``dtype.value`` in a jit helper (FlagGems' ``get_dtype_min(dtype)``): compiled, a
  dtype argument arrives as a ``constexpr`` whose ``value`` is the dtype; the interpreter
  passes the bare dtype, which has no ``value``. Under the interpreter a dtype's
  ``value`` is itself.

Over-rejection probe 15 (real published kernels): three FlagGems kernels failed so on a
CPU. Installed with the libdevice math (``interpreted_libdevice.install``) in the
processes that run kernels under the interpreter; trusted code.
"""

from __future__ import annotations

import ast
from typing import Any, Callable

#: The helpers' names in a rewritten kernel's globals (the interpreter copies its own
#: module's globals into every kernel it rewrites).
HELPER = "_kz_interpreted_bool_op"
NOT_HELPER = "_kz_interpreted_not"


def bool_op(left: Any, right: Callable[[], Any], is_and: bool) -> Any:
    """``left and right()`` (or ``or``) with Triton's meaning for tensors."""
    import triton.language as tl

    if isinstance(left, tl.tensor):
        value = right()
        if isinstance(value, tl.tensor) or left.type.is_block():
            return left.logical_and(value) if is_and else left.logical_or(value)
        return (left if not left else value) if is_and else (left if left else value)
    if is_and:
        return right() if left else left
    return left if left else right()


def not_op(operand: Any) -> Any:
    """``not operand`` with Triton's meaning for tensors."""
    import triton.language as tl

    if isinstance(operand, tl.tensor):
        return operand.__not__()
    return not operand


def install() -> None:
    """Patch the interpreter's source rewriter and ``tl.dtype`` (idempotent: each patch
    only where the attribute is absent)."""
    import triton.language as tl

    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - a Triton without this interpreter
        return
    transformer = getattr(interpreter, "ASTTransformer", None)
    if transformer is not None and not hasattr(transformer, "visit_BoolOp"):

        def visit_BoolOp(self: Any, node: ast.BoolOp) -> Any:
            node = self.generic_visit(node)
            is_and = isinstance(node.op, ast.And)
            expression = node.values[0]
            for value in node.values[1:]:
                thunk = ast.Lambda(
                    args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), body=value
                )
                expression = ast.Call(func=ast.Name(id=HELPER, ctx=ast.Load()), args=[expression, thunk, ast.Constant(value=is_and)], keywords=[])
            return ast.copy_location(expression, node)

        transformer.visit_BoolOp = visit_BoolOp
        setattr(interpreter, HELPER, bool_op)
    if transformer is not None and not hasattr(transformer, "visit_UnaryOp"):

        def visit_UnaryOp(self: Any, node: ast.UnaryOp) -> Any:
            node = self.generic_visit(node)
            if not isinstance(node.op, ast.Not):
                return node
            call = ast.Call(func=ast.Name(id=NOT_HELPER, ctx=ast.Load()), args=[node.operand], keywords=[])
            return ast.copy_location(call, node)

        transformer.visit_UnaryOp = visit_UnaryOp
        setattr(interpreter, NOT_HELPER, not_op)
    if not hasattr(tl.dtype, "value"):
        tl.dtype.value = property(lambda self: self)
    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is not None and not getattr(builder.create_splat, "_kz_keeps_bool", False):
        builder.create_splat = _bool_splat(builder.create_splat)


def _bool_splat(create_splat: Callable[..., Any]) -> Callable[..., Any]:
    """The interpreter's ``create_splat`` keeping a comparison's truth values as truth
    values: a comparison's data are booleans labelled with its operands' dtype, and a
    scalar one (``row < T``) was broadcast as that dtype's integers, so ``(cols < D) &
    (row < T)`` was integers and a load refused it as a mask ("mask has unsupported
    dtype"; over-rejection probe 22, flash-linear-attention's masks). Compiled, it is an
    element-wise ``and`` of two masks."""
    import numpy as np

    def splat(self: Any, ret_ty: Any, arg: Any) -> Any:
        result = create_splat(self, ret_ty, arg)
        if np.asarray(arg.data).dtype == np.bool_ and result.data.dtype != np.bool_:
            result.data = result.data.astype(np.bool_)
        return result

    splat._kz_keeps_bool = True  # type: ignore[attr-defined]
    return splat
