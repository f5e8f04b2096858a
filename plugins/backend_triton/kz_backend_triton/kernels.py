"""The ``triton`` backend's kernels for the trusted executor.

``trusted.extract_kernels`` takes the ``@triton.jit`` functions out of the candidate's
syntax tree and builds them in a namespace of their own (Triton, its language module,
constants and each other), without running the candidate's module. A recorded launch
names its kernel by function name; the executor launches it here, through Triton's own
launcher (or its interpreter on a CPU), with the grid and the arguments that the plan
recorded. A plan that names a kernel the source does not define with ``@triton.jit``
(generated at run time, by torch.compile, by another library) cannot be replayed.
Runs in the executor only.
"""

from __future__ import annotations

import functools
import re

from collections.abc import Mapping
from typing import Any

from kz_core import KernelCompileError, TrustedKernels, is_triton_wrapper, launch_table_memory


class ForeignKernel(RuntimeError):
    """A plan launched a Triton kernel that is not in the candidate's source."""

    check = "kernel_not_in_source"


class KernelArgumentError(RuntimeError):
    """A launch gave a tensor where a kernel cannot take one as memory."""

    check = "kernel_argument"


class KernelOutOfBounds(RuntimeError):
    """An interpreted kernel wrote memory outside the tensors its launch gave it."""

    check = "kernel_out_of_bounds"


class NestedLaunch(KernelCompileError):
    """An interpreted kernel's body launched a kernel (``K[grid](...)`` of a kernel given
    as a constexpr): Triton's interpreter runs it, but Triton compiles no such kernel for a
    GPU, so neither does kz's executor on a CPU."""


#: Interpreted launches in progress in this process (0 or 1: a second is refused).
_LAUNCH_DEPTH = [0]


def _refuse_nested_launches() -> None:
    """Wrap the interpreter's launch (once per process) so that a launch made while another
    kernel's body runs raises :class:`NestedLaunch`. A device function called from a body
    (``helper(x)``) goes through ``__call__``, an autotuner's trial launches one after the
    other, and neither is refused."""
    from triton.runtime.interpreter import InterpretedFunction

    original = InterpretedFunction.run
    if getattr(original, "_kz_refuses_nested", False):
        return

    @functools.wraps(original)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _LAUNCH_DEPTH[0]:
            name = getattr(getattr(self, "fn", None), "__name__", "a kernel")
            raise NestedLaunch(f"a kernel's body launched the Triton kernel {name!r} (kernel[grid](...) inside a @triton.jit function), which Triton does not compile")
        _LAUNCH_DEPTH[0] += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _LAUNCH_DEPTH[0] -= 1

    run._kz_refuses_nested = True  # type: ignore[attr-defined]
    InterpretedFunction.run = run


def _in_chain(exc: BaseException, kind: type, depth: int = 16) -> BaseException | None:
    """``exc`` or an exception it was raised from or during (to ``depth`` links: the
    interpreter wraps a helper's error once per call it passes through), if of ``kind``."""
    pending, seen = [exc], 0
    while pending and seen < depth:
        link = pending.pop(0)
        seen += 1
        if isinstance(link, kind):
            return link
        pending += [e for e in (link.__cause__, link.__context__) if e is not None]
    return None


def _python_function(kernel: Any) -> Any:
    """The plain function under a kernel's wrappers (autotune, heuristics, JIT, interpreter)."""
    import inspect

    for _ in range(16):
        if inspect.isfunction(kernel):
            return kernel
        kernel = getattr(kernel, "fn", None)
    return None


def _annotation_text(annotation: Any) -> str:
    """An annotation as Triton reads it to find constexprs (``tl.constexpr``, the string
    ``"tl.constexpr"``)."""
    if isinstance(annotation, str):
        return annotation
    return str(getattr(annotation, "__name__", annotation))


def _holds_tensor(value: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if is_triton_wrapper(value):  # triton.reinterpret's TensorWrapper, a host TensorDescriptor
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds_tensor(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_tensor(item) for item in [*value.keys(), *value.values()])
    return False


def _memory_argument(value: Any) -> bool:
    """A tensor, or a tuple of such (Triton's tuple arguments), or a value holding none.
    Triton's wrappers of a tensor count as one (``triton.reinterpret``'s ``TensorWrapper``,
    a host ``TensorDescriptor``): Triton passes them as memory, where a pointer may go."""
    import torch

    if isinstance(value, torch.Tensor):
        return True
    if is_triton_wrapper(value):
        return isinstance(value.base, torch.Tensor)
    if isinstance(value, tuple):
        return all(_memory_argument(item) for item in value)
    return not _holds_tensor(value)


def check_arguments(name: str, kernel: Any, args: list[Any], options: dict[str, Any]) -> None:
    """Refuse a launch that gives a kernel a tensor other than as memory: as the value of a
    ``tl.constexpr`` parameter or a launch option, or inside a list or a dict. A constexpr
    is a Python value to the kernel's body (the object itself under the interpreter; the
    code generator calls its methods while it compiles), so a tensor there lets torch do
    the work inside the launch, where no plan step sees it. Tensors go to Triton as
    pointers only through plain parameters (or tuples of them)."""
    import inspect

    function = _python_function(kernel)
    if function is None:
        return
    parameters = list(inspect.signature(function).parameters.values())
    constexpr = {p.name for p in parameters if p.annotation is not inspect.Parameter.empty and "constexpr" in _annotation_text(p.annotation)}
    bound = [(parameters[i].name if i < len(parameters) else None, value) for i, value in enumerate(args)]
    bound += list(options.items())
    names = {p.name for p in parameters}
    for param, value in bound:
        memory = param is not None and param in names and param not in constexpr
        if (memory and not _memory_argument(value)) or (not memory and _holds_tensor(value)):
            if memory:
                where = f"a list or dict in its parameter {param!r}"
            elif param in constexpr:
                where = f"its constexpr parameter {param!r}"
            else:
                where = f"the launch option {param!r}" if param else "an extra argument"
            raise KernelArgumentError(
                f"the launch of Triton kernel {name!r} gave a tensor in {where}; a kernel takes tensors only as plain "
                "(non-constexpr) parameters or tuples of them, which it reads as memory"
            )


#: Names in a Triton source that read bytes as another dtype: a bitcast, a pointer type
#: (``tl.pointer_type``, its alias ``tl.pi32_t``) to cast a pointer to, inline PTX,
#: libdevice's ``float_as_int`` and kin, Triton's custom float8 conversions.
REINTERPRETING = re.compile(r"bitcast|pointer_type|pi32_t|inline_asm|_as_|convert_custom")


def reads_bytes_as_another_dtype(source: str) -> bool:
    """Whether a candidate's kernels may read bytes as another dtype: a name of
    :data:`REINTERPRETING` in a ``@triton.jit`` function or an import (an alias names it
    there), or a cast in a kernel whose target is not a dtype written out
    (``tl.float32``, ``p.dtype.element_ty``): a bitcast passed without its name
    (``x.to(dtype, None, True)``, ``x.to(*how)``) or a pointer's own type
    (``src.to(dst.dtype)`` casts a pointer). The wrapper's torch code is not read: its
    views of bytes as another dtype are ops the replay sees."""
    import ast

    import triton.language as tl

    from kz_backend_triton.trusted import _Source

    try:
        tree = ast.parse(source)
        found = _Source(tree)
        kernels = [fdef for fdef, _ in found.kernels.values()]
    except Exception:  # noqa: BLE001 - what cannot be read is taken to reinterpret
        return True
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    if any(REINTERPRETING.search(ast.unparse(node)) for node in [*kernels, *imports]):
        return True
    scalar = {name for name in dir(tl) if isinstance(getattr(tl, name), tl.dtype) and not isinstance(getattr(tl, name), tl.pointer_type)}

    def value(name: str) -> Any:
        constant = found.constants.get(name)
        return getattr(constant, "value", constant)

    def written_out(target: ast.expr | None, given: set[str]) -> bool:
        if isinstance(target, ast.Name):
            # A constexpr parameter the body never rebinds (a plan gives it only dtypes
            # Triton names, never a pointer type), or a module constant holding a dtype.
            return target.id in given or (isinstance(value(target.id), tl.dtype) and not isinstance(value(target.id), tl.pointer_type))
        return isinstance(target, ast.Attribute) and (target.attr in scalar or target.attr == "element_ty")

    for fdef in kernels:
        bound = {t.id for t in ast.walk(fdef) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
        given = {a.arg for a in fdef.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)} - bound
        for node in ast.walk(fdef):
            name = (node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")) if isinstance(node, ast.Call) else ""
            if name not in ("to", "cast"):
                continue
            if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
                return True
            position = 0 if name == "to" and isinstance(node.func, ast.Attribute) else 1
            extra = node.args[position + 1:]
            target = node.args[position] if len(node.args) > position else next((k.value for k in node.keywords if k.arg == "dtype"), None)
            if extra[1:] or any(k.arg == "bitcast" for k in node.keywords) or not written_out(target, given):
                return True
    return False


class TritonKernels(TrustedKernels):
    """The candidate's ``@triton.jit`` kernels, by name."""

    backend = "triton"

    def __init__(self, kernels: Mapping[str, Any], source: str | None = None):
        self.kernels = dict(kernels)
        # Bits read as another dtype only through a bitcast, a pointer cast or inline PTX.
        self.reinterprets_bits = source is None or reads_bytes_as_another_dtype(source)
        self._reinterpreted: dict[str, bool] = {}
        self._last: dict[str, bool] = {}  # whether each kernel's last launch did
        self._compiled: dict[int, tuple[Any, bool]] = {}  # id -> (compiled kernel, held so its id stays its own)
        self._interpreted = _watch_interpreter()
        _set_scratch_allocator()

    def launch(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        from triton.compiler.errors import CompilationError

        name = str(step["kernel"].get("name", ""))
        kernel = self.kernels.get(name)
        if kernel is None:
            raise ForeignKernel(
                f"the forward launched a Triton kernel named {name!r} that the candidate's source does not define with @triton.jit "
                "(a kernel generated at run time, by torch.compile or by another library)"
            )
        args, options = self._resolved(args), self._resolved(options)
        check_arguments(name, kernel, args, options)
        before = _REINTERPRETED[0]
        if self._interpreted:
            # Given: its tensors, and those whose addresses are in a table it was given.
            _GIVEN[0] = given_memory([args, options, launch_table_memory()])
        try:
            compiled = kernel[tuple(step["grid"])](*args, **options)
        except CompilationError as exc:
            raise KernelCompileError(str(exc)) from exc
        except Exception as exc:
            if isinstance(exc.__cause__ or exc.__context__, KernelOutOfBounds):  # the interpreter wraps it
                raise KernelOutOfBounds(str(exc.__cause__ or exc.__context__)) from None
            nested = _in_chain(exc, NestedLaunch)
            if nested is not None:
                raise KernelCompileError(str(nested)) from None
            raise
        finally:
            _GIVEN[0] = None
        if self._interpreted:
            seen = _REINTERPRETED[0] > before
        else:  # each compiled kernel's IR read once (Triton keeps them)
            if id(compiled) not in self._compiled:
                self._compiled[id(compiled)] = (compiled, _compiled_reinterprets(compiled))
            seen = self._compiled[id(compiled)][1]
        self._reinterpreted[name] = self._reinterpreted.get(name, False) or seen
        self._last[name] = seen

    def reinterprets(self, step: Mapping[str, Any]) -> bool:
        """Whether the kernel of ``step`` may have read bytes as another dtype: its source
        says so, or what Triton built for it did at a launch so far (the interpreter's
        builder was asked for a bitcast, a pointer made an integer or the other way, inline
        PTX; on a GPU the compiled kernel's IR holds one). Read after its launch."""
        return self.reinterprets_bits or self._reinterpreted.get(str(step["kernel"].get("name", "")), True)

    def reinterpreted_last(self, step: Mapping[str, Any]) -> bool:
        """Whether the last launch of ``step``'s kernel read bytes as another dtype (under
        the interpreter, that launch's own builder calls and addresses)."""
        return self.reinterprets_bits or self._last.get(str(step["kernel"].get("name", "")), True)

    def _resolved(self, value: Any) -> Any:
        """``value`` with each kernel a plan names as an argument (a ``@triton.jit``
        function given as a constexpr) made this source's own build of it."""
        from kz_core import KernelRef

        if isinstance(value, KernelRef):
            kernel = self.kernels.get(value.name)
            if kernel is None:
                raise ForeignKernel(
                    f"the forward gave a kernel a Triton function named {value.name!r} that the candidate's source does not "
                    "define with @triton.jit"
                )
            return kernel
        if isinstance(value, list):
            return [self._resolved(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._resolved(v) for v in value)
        if isinstance(value, dict):
            return {k: self._resolved(v) for k, v in value.items()}
        return value

    def precompile(self, step: Mapping[str, Any], args: list[Any], options: dict[str, Any]) -> None:
        name = str(step["kernel"].get("name", ""))
        args, options = self._resolved(args), self._resolved(options)
        kernel = self.kernels.get(name)
        if kernel is not None:
            check_arguments(name, kernel, args, options)  # compiling calls a constexpr's methods
        if kernel is not None and hasattr(kernel, "warmup"):
            kernel.warmup(*args, grid=tuple(step["grid"]), **options)

    def describe(self) -> list[str]:
        return [f"kernels: {', '.join(sorted(self.kernels)) or 'none'}"]


#: What in a compiled kernel's Triton IR reads bytes as another dtype (libdevice's
#: ``__nv_float_as_int`` and kin are external calls there).
REINTERPRETING_IR = re.compile(r"tt\.bitcast|tt\.ptr_to_int|tt\.int_to_ptr|inline_asm|__nv_\w*_as_\w*")

#: The interpreter builder's calls that read bytes as another dtype, counted (``[count]``).
_REINTERPRETED = [0]
_INTERPRETER_CALLS = ("create_bitcast", "create_ptr_to_int", "create_int_to_ptr", "create_inline_asm")


#: Each dtype's element type as a Triton pointer names it (a bool tensor's is int8).
_ELEMENT_TYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "bool": "int8",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16", "int32": "int32", "uint32": "uint32",
    "int64": "int64", "uint64": "uint64", "float8_e5m2": "fp8e5", "float8_e4m3fn": "fp8e4nv",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16",
}

#: The memory the launch running under the interpreter was given (its tensor arguments,
#: and the tensors whose addresses are in an address table it was given: a pointer loaded
#: from the table reaches them): starts, ends and the element types of each storage
#: (``given_memory``); None outside a trusted launch.
_GIVEN: list[Any] = [None]


def given_memory(values: Any) -> tuple[Any, Any, list[set[str]]]:
    """The storages of the tensors in ``values`` (through tuples, lists, dicts, tensor
    descriptors and Triton's dtype wrappers): sorted starts, ends, and the element types
    each was given as."""
    import numpy as np
    import torch

    spans: dict[int, tuple[int, set[str]]] = {}

    def visit(value: Any) -> None:
        if isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, torch.Tensor) or isinstance(getattr(value, "base", None), torch.Tensor):
            tensor = value if isinstance(value, torch.Tensor) else value.base
            dtype = str(getattr(value, "dtype", tensor.dtype)).removeprefix("torch.")
            storage = tensor.untyped_storage()
            start = storage.data_ptr()
            spans.setdefault(start, (start + storage.nbytes(), set()))[1].add(_ELEMENT_TYPES.get(dtype, dtype))

    visit(values)
    starts = sorted(spans)
    return np.array(starts, dtype=np.uint64), np.array([spans[s][0] for s in starts], dtype=np.uint64), [spans[s][1] for s in starts]


def _check_addresses(pointers: Any, mask: Any, element: Any, write: bool) -> None:
    """Under a trusted launch, where an interpreted load or store reaches: into a given
    storage as another element type than it was given as, or a load outside every given
    storage, is reading bytes as another dtype (an address found by scanning, with no
    cast, as a float pointer into an int8 buffer); a write outside them is refused."""
    import numpy as np

    given = _GIVEN[0]
    if given is None:
        return
    starts, ends, types = given
    addresses = np.asarray(pointers.data).astype(np.uint64, copy=False).reshape(-1)
    if mask is not None:
        addresses = addresses[np.broadcast_to(np.asarray(mask.data, dtype=bool), np.shape(pointers.data)).reshape(-1)]
    if addresses.size == 0:
        return
    size = max(1, getattr(element, "primitive_bitwidth", 8) // 8)
    index = np.searchsorted(starts, addresses, side="right").astype(np.int64) - 1
    inside = (index >= 0) & (addresses + np.uint64(size) <= ends[np.clip(index, 0, None)]) if len(starts) else np.zeros(addresses.shape, bool)
    if not inside.all():
        if write:
            raise KernelOutOfBounds(
                "a kernel wrote memory outside the tensors its launch gave it (an address from arithmetic on a pointer); "
                "a kernel may write only the tensors it is given"
            )
        _REINTERPRETED[0] += 1
        return
    name = str(element)
    if any(name not in types[i] for i in np.unique(index).tolist()):
        _REINTERPRETED[0] += 1


def _watch_interpreter() -> bool:
    """Under Triton's interpreter, count its builder's reinterpreting calls and check
    where its loads and stores reach (once per process); whether kernels run interpreted."""
    import os

    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    _refuse_nested_launches()
    _watch_memory(builder)
    for name in _INTERPRETER_CALLS:
        current = getattr(builder, name, None)
        if current is None or getattr(current, "_kz_counted", False):
            continue
        original = _late_bound(builder, name)

        def counted(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            if _name == "create_inline_asm" or _asked_by_kernel():
                _REINTERPRETED[0] += 1
            return _original(*args, **kwargs)

        counted._kz_counted = True  # type: ignore[attr-defined]
        setattr(builder, name, counted)
    return True


@functools.cache
def _triton_dir() -> str:
    """Triton's package folder (asked on every bitcast and atomic an interpreted kernel
    makes)."""
    import os

    import triton

    return os.path.dirname(triton.__file__) + os.sep


def _asked_by_kernel() -> bool:
    """Whether the builder call being made comes from the kernel's own cast (``x.to(...,
    bitcast=True)``, ``tl.cast``, a pointer made an integer), not from Triton lowering its
    own operations: ``tl.sort`` and ``tl.flip`` compare floats as integers, a float
    ``atomic_max`` works on integers, a load of a bool tensor reads its bytes as int8.
    The Triton frames between the builder and the kernel's code (its source, a helper of
    its own) say which: through ``triton/language/standard.py``, or entered by anything
    but ``to``/``cast``, it is Triton's."""
    import sys

    root = _triton_dir()
    frame = sys._getframe(2)
    entry = None
    while frame is not None and frame.f_code.co_filename.startswith(root):
        path = frame.f_code.co_filename[len(root):].replace("\\", "/")
        if path == "language/standard.py":
            return False
        if path == "language/core.py" and frame.f_code.co_name != "wrapper":
            entry = frame.f_code.co_name
        frame = frame.f_back
    return entry in ("to", "cast")


def _api_pointer_element() -> Any:
    """The element type of the pointer the kernel gave ``tl.atomic_*`` (Triton lowers a
    float ``atomic_max``/``atomic_min`` onto an integer pointer), or None."""
    import sys

    root = _triton_dir()
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(root):
        if frame.f_code.co_filename.endswith("core.py") and frame.f_code.co_name.startswith("atomic_"):
            pointer = frame.f_locals.get("pointer")
            return getattr(getattr(pointer, "dtype", None), "element_ty", None)
        frame = frame.f_back
    return None


def _late_bound(builder: Any, name: str) -> Any:
    """The builder's method ``name`` as its class has it when called, not when wrapped:
    kz's bfloat16 and libdevice mends patch the interpreter's builder class, and may be
    installed after these wrappers (a wrapper holding the old bound method would skip
    them). An attribute set on the builder itself is kept as it is."""
    if name in vars(builder):
        return vars(builder)[name]
    cls = type(builder)

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(cls, name)(builder, *args, **kwargs)

    return call


def _watch_memory(builder: Any) -> None:
    """Wrap the interpreter builder's memory operations with ``_check_addresses``."""
    if getattr(builder.create_masked_load, "_kz_checked", False):
        return
    load, store, cas, rmw = (_late_bound(builder, name) for name in ("create_masked_load", "create_masked_store", "create_atomic_cas", "create_atomic_rmw"))

    def masked_load(ptrs: Any, mask: Any, other: Any, *args: Any, **kwargs: Any) -> Any:
        _check_addresses(ptrs, mask, ptrs.get_element_ty(), False)
        return load(ptrs, mask, other, *args, **kwargs)

    def masked_store(ptrs: Any, value: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        _check_addresses(ptrs, mask, ptrs.get_element_ty(), True)
        return store(ptrs, value, mask, *args, **kwargs)

    def atomic_cas(ptr: Any, cmp: Any, val: Any, *args: Any, **kwargs: Any) -> Any:
        _check_addresses(ptr, None, _api_pointer_element() or val.dtype.scalar, True)
        return cas(ptr, cmp, val, *args, **kwargs)

    def atomic_rmw(op: Any, ptr: Any, val: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        _check_addresses(ptr, mask, _api_pointer_element() or val.dtype.scalar, True)
        return rmw(op, ptr, val, mask, *args, **kwargs)

    for name, wrapped in (("create_masked_load", masked_load), ("create_masked_store", masked_store), ("create_atomic_cas", atomic_cas), ("create_atomic_rmw", atomic_rmw)):
        wrapped._kz_checked = True  # type: ignore[attr-defined]
        setattr(builder, name, wrapped)


def _compiled_reinterprets(compiled: Any) -> bool:
    """Whether a compiled kernel (what a launch returned on a GPU) reads bytes as another
    dtype; true when its Triton IR cannot be read."""
    asm = getattr(compiled, "asm", None)
    ir = asm.get("ttir") if isinstance(asm, dict) else None
    return not isinstance(ir, str) or ir_reinterprets(ir)


_LOC_DEF = re.compile(r'^#(loc\d*) = loc\((.*)\)\s*$', re.MULTILINE)
_OP_LOC = re.compile(r"loc\(#(loc\d*)\)\s*$")
_SSA_RESULT = re.compile(r"^\s*(%[\w.$-]+)(?::\d+)? = ")
_ATOMIC_MINMAX = re.compile(r"tt\.atomic_rmw (max|min|umax|umin)\b")
_BOOL_POINTER_CAST = re.compile(r"tt\.bitcast .*!tt\.ptr<i1>.* -> .*!tt\.ptr<i8>")


def ir_reinterprets(ir: str) -> bool:
    """Whether a kernel's Triton IR reads bytes as another dtype where the kernel asked
    for it. Triton's own lowering is left out: what ``tl.sort`` and ``tl.flip`` do in
    ``triton/language/standard.py`` (their ops' locations say so), a bool tensor's
    pointer read as int8, and the integer view a float ``atomic_max``/``atomic_min``
    works through (a bitcast used only by such atomics and the sign-bit shift that
    chooses between them). An IR without locations keeps
    every such op counted."""
    definitions = dict(_LOC_DEF.findall(ir))

    def origin(name: str, depth: int = 0) -> str:
        text = definitions.get(name, "")
        if depth > 64:
            return text
        if text.startswith("callsite("):  # callsite(#callee at #caller): where the op is
            callee = re.match(r"callsite\(#(loc\d*)", text)
            return origin(callee.group(1), depth + 1) if callee else text
        inner = re.fullmatch(r'"[^"]*"\(#(loc\d*)\)', text)  # a name given to a location
        return origin(inner.group(1), depth + 1) if inner else text

    lines = ir.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("#loc") or not REINTERPRETING_IR.search(line):
            continue
        if _BOOL_POINTER_CAST.search(line):
            continue
        where = _OP_LOC.search(line)
        if where and "/triton/language/standard.py" in origin(where.group(1)).replace("\\", "/"):
            continue
        result = _SSA_RESULT.match(line)
        if "tt.bitcast" in line and result:
            name = re.escape(result.group(1))
            uses = [other for other in lines[number + 1:] if re.search(name + r"(?![\w.$-])", other) and not other.startswith("#loc")]
            # Triton's float atomic_max/min: the integer view goes to the atomics and to the
            # sign-bit shift that chooses between them, nowhere else.
            if uses and all(_ATOMIC_MINMAX.search(use) or "arith.shrui" in use for use in uses) and any(_ATOMIC_MINMAX.search(use) for use in uses):
                continue
        return True
    return False


def _set_scratch_allocator() -> None:
    """Give Triton an allocator for kernels' global scratch memory (on a GPU, a kernel that
    makes tensor descriptors in its body, ``tl.make_tensor_descriptor``, needs one): the
    candidate's host code sets its own with ``triton.set_allocator``, and that code never
    runs in the executor. Allocations come from torch's caching allocator on the current
    device (inside a CUDA graph capture, from the graph's pool). Not under the interpreter,
    which needs none, nor on a Triton without ``set_allocator``."""
    import os

    import triton

    if os.environ.get("TRITON_INTERPRET") == "1" or not hasattr(triton, "set_allocator"):
        return
    import torch

    def allocate(size: int, alignment: int, stream: Any) -> Any:
        return torch.empty(size, dtype=torch.int8, device=torch.device("cuda", torch.cuda.current_device()))

    triton.set_allocator(allocate)
