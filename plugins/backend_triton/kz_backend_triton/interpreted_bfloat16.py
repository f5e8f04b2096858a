"""bfloat16 arithmetic under Triton's CPU interpreter.

The interpreter keeps bfloat16 values as their 16-bit patterns (``uint16`` arrays) and
decodes them only where it converts bfloat16 to or from float32. Everywhere else NumPy
works on the patterns as integers (Triton 3.9): ``x + 0.5 * y`` of bfloat16 tiles gave
1e37 or NaN, a comparison ordered every negative value above zero, ``tl.sum`` and
``tl.argmax`` added and compared patterns, and ``True`` converted to bfloat16 was 9e-41.
So an honest kernel that computes in bfloat16 was ``incorrect`` on a CPU while right on a
GPU (over-rejection probe 14: six such candidates). :func:`install` widens bfloat16
operands to the float32 values they stand for (exactly), computes, and rounds a bfloat16
result back to nearest even, as the GPU's conversion does: in the builder's binary, unary
and ternary operations (a select only moves patterns, and is left as it is), its fused
multiply-add, its conversions, the fast paths of its reductions and scans, and ``tl.dot``
(whose bfloat16 tiles' product was off by 1e10: probe 13).

The interpreter's atomics refused bfloat16 (``Unsupported data type``: a ``runtime_error``
on a CPU for an honest kernel that accumulates bfloat16 with ``tl.atomic_add``). A
bfloat16 add is now done here, element by element in order (two lanes of one block on one
address both count, as on a GPU), on the float32 values, rounded back to nearest even;
the old values are returned. Triton refuses bfloat16 in every other atomic, compiled
too. Not mended: ``libdevice`` on bfloat16, which the GPU compiler refuses too.
Installed with the libdevice math (``interpreted_libdevice.install``) in the processes
that run kernels under the interpreter; trusted code.
"""

from __future__ import annotations

from typing import Any


def install() -> None:
    """Patch the interpreter's builder, reductions and scans (idempotent: the builder
    carries a mark)."""
    import ctypes

    import numpy as np
    import torch
    import triton.language as tl

    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - a Triton without this interpreter
        return
    builder, handle = interpreter.InterpreterBuilder, interpreter.TensorHandle
    bf16 = tl.bfloat16
    if getattr(builder, "_kz_bfloat16", False):
        return

    def is_bf16(value: Any) -> bool:
        return getattr(value.dtype, "scalar", value.dtype) == bf16

    def widen(data: Any) -> Any:  # bfloat16 patterns -> their float32 values (bfloat16 is float32's upper half)
        return (np.asarray(data).astype(np.uint32) << np.uint32(16)).view(np.float32)

    def narrow(data: Any) -> Any:  # float32 values -> bfloat16 patterns, rounded to nearest even
        values = np.ascontiguousarray(np.asarray(data, dtype=np.float32))
        return torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).reshape(values.shape)

    def operand(value: Any) -> Any:
        return widen(value.data) if is_bf16(value) else value.data

    def result(output: Any, dtype: Any) -> Any:
        output = np.asarray(output)
        if output.dtype == np.bool_:
            return handle(output, tl.int1)
        if dtype == bf16:
            return handle(narrow(output), bf16)
        return handle(output.astype(interpreter._get_np_dtype(dtype)), dtype)

    binary_op, unary_op, ternary_op = builder.binary_op, builder.unary_op, builder.ternary_op
    create_fma, cast_impl, create_fp_to_fp = builder.create_fma, builder.cast_impl, builder.create_fp_to_fp

    def mended_binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if is_bf16(lhs) or is_bf16(rhs):
            return result(op(operand(lhs), operand(rhs)), lhs.dtype.scalar)
        return binary_op(self, lhs, rhs, op)

    def mended_unary_op(self: Any, arg: Any, op: Any) -> Any:
        if is_bf16(arg):
            return result(op(widen(arg.data)), bf16)
        return unary_op(self, arg, op)

    def mended_ternary_op(self: Any, lhs: Any, rhs: Any, other: Any, op: Any) -> Any:
        if op is not np.where and any(is_bf16(v) for v in (lhs, rhs, other)):  # a clamp
            return result(op(operand(lhs), operand(rhs), operand(other)), other.dtype.scalar)
        return ternary_op(self, lhs, rhs, other, op)

    def mended_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if is_bf16(z):  # one rounding, as the GPU's: the float64 product and sum are exact enough
            product = np.multiply(operand(x), operand(y), dtype=np.float64)
            return handle(narrow(np.add(product, operand(z), dtype=np.float64).astype(np.float32)), bf16)
        return create_fma(self, x, y, z)

    def mended_cast(self: Any, src: Any, dst_type: Any) -> Any:
        source, target = src.dtype.scalar, dst_type.scalar
        if target == bf16 and source != bf16:  # an integer, a truth value or a float, rounded
            return handle(narrow(np.asarray(src.data).astype(np.float32)), bf16)
        if source == bf16 and target != bf16:
            return cast_impl(self, handle(widen(src.data), tl.float32), dst_type)
        return cast_impl(self, src, dst_type)

    def mended_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if bf16 in (src.dtype.scalar, dst_type.scalar):
            return self.cast_impl(src, dst_type)
        return create_fp_to_fp(self, src, dst_type, rounding_mode)

    builder.binary_op, builder.unary_op, builder.ternary_op = mended_binary_op, mended_unary_op, mended_ternary_op
    builder.create_fma, builder.cast_impl, builder.create_fp_to_fp = mended_fma, mended_cast, mended_fp_to_fp

    def widened(tensor: Any) -> Any:
        block = tl.block_type(tl.float32, tensor.shape) if tensor.type.is_block() else tl.float32
        return tl.core.tensor(handle(widen(tensor.handle.data), tl.float32), block)

    def narrowed(tensor: Any) -> Any:
        if tensor.dtype != tl.float32:
            return tensor
        block = tl.block_type(bf16, tensor.shape) if tensor.type.is_block() else bf16
        return tl.core.tensor(handle(narrow(tensor.handle.data), bf16), block)

    for operations in (interpreter.ReduceOps, interpreter.ScanOps):
        apply_impl = operations.apply_impl

        def mended_apply(self: Any, inputs: Any, _apply: Any = apply_impl) -> Any:
            was = [isinstance(t, tl.core.tensor) and t.dtype == bf16 for t in inputs]
            if not any(was):
                return _apply(self, inputs)
            returned = _apply(self, tuple(widened(t) if w else t for t, w in zip(inputs, was)))
            outputs = list(returned) if isinstance(returned, (list, tuple)) else [returned]
            outputs = [narrowed(t) if i < len(was) and was[i] else t for i, t in enumerate(outputs)]
            return outputs if isinstance(returned, (list, tuple)) else outputs[0]

        operations.apply_impl = mended_apply

    create_dot = builder.create_dot

    def mended_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any) -> Any:
        # Probe 13: a 16 x 16 product of bfloat16 tiles was off by 1e10.
        if (is_bf16(a) or is_bf16(b)) and not is_bf16(d):
            a, b = (handle(widen(v.data), tl.float32) if is_bf16(v) else v for v in (a, b))
        return create_dot(self, a, b, d, *rest)

    builder.create_dot = mended_dot

    create_atomic_rmw = builder.create_atomic_rmw
    rmw = interpreter._interpreter.RMW_OP
    combines = {rmw.ADD: np.add, rmw.FADD: np.add}  # Triton refuses bfloat16 in every other atomic

    def mended_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        combine = combines.get(self.ir_rmw_op_to_interpreter_rmw_op.get(op)) if is_bf16(val) else None
        if combine is None:
            return create_atomic_rmw(self, op, ptr, val, mask, sem, scope)
        addresses = np.asarray(ptr.data)
        shape = addresses.shape
        values = np.broadcast_to(widen(val.data), shape)
        live = np.broadcast_to(np.asarray(mask.data, dtype=bool), shape) if mask is not None else np.ones(shape, dtype=bool)
        old = np.zeros(shape, dtype=np.uint16)
        for index in np.ndindex(shape):
            if live[index]:
                cell = ctypes.c_uint16.from_address(int(addresses[index]))
                old[index] = cell.value
                cell.value = int(narrow(combine(widen(np.uint16(cell.value)), values[index])).reshape(-1)[0])
        return handle(old, bf16)

    builder.create_atomic_rmw = mended_atomic_rmw
    builder._kz_bfloat16 = True
