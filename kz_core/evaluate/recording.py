"""Recording a candidate's forward call as a *plan*, inside the candidate's own process.

A plan is plain data: the torch operations the forward called (at the aten level, seen
through a ``TorchDispatchMode``), the kernel launches of its backend (reported by the
backend's launch path through :func:`record_kernel`), which tensors each one read and
wrote (by reference: an input, a constant the module holds, or a value an earlier step
produced), and which values the forward returned. Constants (parameters, buffers, any
tensor the forward used that it did not make) travel with the plan as data. An address of
such a tensor that the forward put in a tensor made from host data (a table of pointers a
kernel loads through) is a reference too, never the number this process saw.

The plan is replayed by a trusted *executor* (``kz_core/evaluate/executor_ops.py``) on
the secret inputs: the executor decides what ran, checks it and times it. Nothing a
candidate does to this module changes its verdict: a plan that does not describe the
work gives wrong outputs when replayed, and the candidate's process never sees the
inputs it is judged on. This module runs inside the candidate's sandboxed process only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from kz_core.evaluate.wire import lent_empty

#: The plan format's version (the executor refuses others).
PLAN_VERSION = 1
#: Tables of addresses (Triton tutorial 8's grouped GEMM: ``torch.tensor([a.data_ptr(),
#: ...], device=...)``) are looked for in int64 and uint64 tensors made from host data of
#: at most this many elements; a plan's lists are no longer (``plans.MAX_ITEMS``).
MAX_TABLE_ENTRIES = 4096
#: Table elements below this are numbers, never addresses (no allocator hands out the
#: first pages of an address space).
_SMALLEST_ADDRESS = 1 << 16
#: The profiler's range operators (``torch.profiler.record_function``): run, never recorded.
PROFILER_RANGES = frozenset({"_record_function_enter", "_record_function_enter_new", "_record_function_exit"})
#: The recorder of the forward call being recorded in this process, if any.
_active: list[Recorder] = []
#: Tracers a backend adds (``TRACERS.append(factory)``): ``factory(recorder)`` is a context
#: manager entered around every recorded forward call, for launches that do not pass
#: through Python (``cuda_inline``'s C++ host code: ``kz_backend_cuda/inline_record.py``).
TRACERS: list[Any] = []
#: Whether this process records plans (a candidate worker of a backend with trusted
#: kernels, from its first ``record`` request): a backend then runs the forward plainly,
#: without tracing calls itself (a profiler would hold CUPTI, which a tracer needs).
_records_plans = [False]


def _composite_kernel(operator: Any) -> bool | None:
    """Whether the dispatcher runs ``operator`` as other operators (a
    ``CompositeImplicitAutograd`` kernel); None where the dispatcher does not know it."""
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(operator.name(), "CompositeImplicitAutograd")
    except RuntimeError:
        return None


def in_dispatcher(operator: Any) -> bool:
    """Whether torch's dispatcher knows ``operator`` (``torch.ops.aten`` also holds
    operators TorchScript alone registers, such as ``_grad_sum_to_size``)."""
    return _composite_kernel(operator) is not None


def is_composite(operator: Any) -> bool:
    """Whether torch runs ``operator`` as other operators (a ``CompositeImplicitAutograd``
    kernel), which a dispatch mode sees instead of it but under ``torch.inference_mode``;
    False for an operator the dispatcher does not know (``aten::save``)."""
    return bool(_composite_kernel(operator))


def add_tracer(factory: Any) -> None:
    """Enter ``factory(recorder)`` (a context manager) around every recorded forward call
    of this process, once however often it is added (see :data:`TRACERS`)."""
    if factory not in TRACERS:
        TRACERS.append(factory)


def records_plans() -> bool:
    """Whether this process records plans (see :data:`_records_plans`)."""
    return _records_plans[0]


class NotReplayable(Exception):
    """The forward did something a plan cannot describe (the message says what).

    :ivar check: the finding the parent reports it under.
    """

    def __init__(self, message: str, check: str = "not_replayable"):
        super().__init__(message)
        self.check = check


def _empty_strided_on(device: str, pinned: bool = False) -> Any:
    def empty_strided(size: Sequence[int], stride: Sequence[int], dtype: Any) -> Any:
        return torch.empty_strided(size, stride, dtype=dtype, device=device, pin_memory=pinned)

    return empty_strided


def _reinterpret_tensor(base: Any, size: Sequence[int], stride: Sequence[int], offset_increment: int = 0) -> Any:
    # The same view inductor's makes: the base's storage, its offset moved on.
    return torch.as_strided(base, size, stride, base.storage_offset() + offset_increment)


#: Helpers of code generated by torch inductor (and of kernels written in its style, as
#: KernelBook's and KernelLLM's are) that make tensors without torch's dispatcher, and
#: their dispatched equivalents: a recording saw neither the buffer a kernel wrote nor the
#: view of it returned, took both for constants, and an honest candidate was rejected (its
#: output "written by nothing").
INDUCTOR_HELPERS = {
    "_empty_strided_cpu": _empty_strided_on("cpu"),
    "_empty_strided_cpu_pinned": _empty_strided_on("cpu", pinned=True),
    "_empty_strided_cuda": _empty_strided_on("cuda"),
    "_reinterpret_tensor": _reinterpret_tensor,
}


def dispatch_inductor_helpers() -> list[str]:
    """Replace inductor's undispatched helpers (``torch._C._dynamo.guards``) with their
    dispatched equivalents, which a recording sees and a replay repeats; the names
    replaced. Call before candidate code is loaded (it binds them at import)."""
    guards = getattr(getattr(getattr(torch, "_C", None), "_dynamo", None), "guards", None)
    replaced = [name for name in INDUCTOR_HELPERS if guards is not None and hasattr(guards, name)]
    for name in replaced:
        setattr(guards, name, INDUCTOR_HELPERS[name])
    return replaced


def active() -> Recorder | None:
    """The recorder of the call being recorded now (backends' launch paths ask)."""
    return _active[-1] if _active else None


def record_kernel(backend: str, kernel: dict[str, Any], grid: Any, args: Sequence[Any], options: dict[str, Any]) -> contextlib.AbstractContextManager[None]:
    """Record one kernel launch of ``backend`` (a backend's launch path calls this just
    before it launches); use the returned context manager around the launch itself, so
    that what the launcher does with torch is not recorded as the forward's work.

    :param kernel: what identifies the kernel to the backend's ``backend_kernels`` in
        the executor (JSON-able: a name, a source and its options).
    :param grid: the launch grid, resolved to integers.
    :param args: the launch arguments (tensors, numbers, dtypes ...).
    :param options: keyword arguments of the launch (constexprs, ``num_warps`` ...).
    """
    recorder = active()
    if recorder is None or recorder.suspended:
        return contextlib.nullcontext()
    recorder.add_kernel(backend, kernel, grid, args, options)
    return recorder.suspend()


def _custom_op_function(func: Any) -> Any:
    """The Python function behind a ``torch.library.custom_op`` (or ``triton_op``), if any."""
    try:
        from torch._library.custom_ops import OPDEFS
    except ImportError:  # pragma: no cover - an older torch
        return None
    qualname = f"{getattr(func, 'namespace', '')}::{func._schema.name.split('::', 1)[-1]}"
    opdef = OPDEFS.get(qualname)
    return getattr(opdef, "_init_fn", None)


def _current_stream() -> int | None:
    """The raw handle of the current CUDA stream (None without CUDA)."""
    # is_initialized first: is_available() would start CUDA's driver in a process (the
    # zygote) that must never touch CUDA before it forks.
    if not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.current_stream().cuda_stream)


def _storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    try:
        return (str(tensor.device), tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):
        return (str(tensor.device), -id(tensor))


class _Held:
    """A tensor the recorder knows, held by a weak reference to its storage.

    A recording keeps no value of the forward alive (a KernelBench norm made four
    intermediates of 6.4 GB each, all kept until the call ended), so a storage may be
    freed during the call and its memory handed to a later tensor: an entry whose
    storage has expired names nothing any more. A tensor whose storage cannot be
    referenced weakly is kept, as before.
    """

    __slots__ = ("ref", "start", "end", "origin", "_weak", "_strong")

    def __init__(self, ref: tuple[str, int], tensor: torch.Tensor):
        self.ref = ref
        #: The storage's bytes ``[start, end)`` and the address of the tensor ``ref`` names
        #: (a view's first element): what a raw pointer into this storage is relative to.
        self.start = self.end = self.origin = 0
        with contextlib.suppress(RuntimeError, NotImplementedError):
            storage = tensor.untyped_storage()
            self.start, self.end, self.origin = storage.data_ptr(), storage.data_ptr() + storage.nbytes(), tensor.data_ptr()
        self._strong: torch.Tensor | None = None
        try:
            from torch.multiprocessing.reductions import StorageWeakRef

            self._weak: Any = StorageWeakRef(tensor.untyped_storage())
        except Exception:  # noqa: BLE001 - a tensor without a plain storage
            self._weak, self._strong = None, tensor

    def alive(self) -> bool:
        return self._strong is not None or (self._weak is not None and not self._weak.expired())


def without_dynamo_import(mode: type) -> type:
    """Let a ``TorchDispatchMode`` subclass dispatch without importing ``torch._dynamo``.

    torch wraps every such ``__torch_dispatch__`` so that Dynamo never traces into it, and
    the wrapper imports ``torch._dynamo`` (and sympy with it: 2.4 s on a small CPU) the
    first time the mode sees an op. While ``torch._dynamo`` is not imported nothing can be
    compiling, so there is nothing to keep Dynamo out of: the function runs as it is. Once
    something imports it (a candidate's ``torch.compile``), the wrapper's own disabling
    takes over, as before. A torch whose wrapper looks different is left alone."""
    import sys

    wrapper = mode.__dict__.get("__torch_dispatch__")
    function = getattr(wrapper, "__wrapped__", None)
    if function is None:
        return mode

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is None or not hasattr(dynamo, "disable"):
            return function(*args, **kwargs)
        try:
            disabled = dynamo.disable(function, recursive=True, wrapping=False)  # as torch._compile does
        except TypeError:  # a torch whose disable has no `wrapping`
            disabled = dynamo.disable(function, recursive=True)
        setattr(function, "__dynamo_disable", disabled)
        return disabled(*args, **kwargs)

    setattr(function, "__dynamo_disable", dispatch)  # the attribute torch._compile's wrapper caches
    return mode


@without_dynamo_import
class Recorder(TorchDispatchMode):
    """Records one forward call (use :meth:`call`)."""

    def __init__(self, inputs: Sequence[Any], max_constant_bytes: int, keep_constants: bool = True):
        """:param keep_constants: copy each constant to the host (a plan to replay); when
            False, a recording only compared with another keeps their shapes, on torch's
            meta device (a second recording of a 4 GiB layer copied it to the host again,
            under the GPU's shared hold)."""
        super().__init__()
        self.steps: list[dict[str, Any]] = []
        self.constants: list[torch.Tensor] = []
        self.keep_constants = keep_constants
        #: The constants that lived in host memory (the rest lived on the forward's device):
        #: a replay keeps them there, as the forward computed with them.
        self.host_constants: list[int] = []
        self.max_constant_bytes = max_constant_bytes
        self.constant_bytes = 0
        self.suspended = 0
        #: Depth of torch operators running now (kernels they launch are torch's own).
        self.in_op = 0
        # The tensors of the call, by identity and by storage, held weakly (_Held): an
        # entry goes when its tensor does, so an identity or an address reused later in
        # the call is never taken for the tensor that had it.
        self._refs: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._storages: dict[tuple[str, int], _Held] = {}
        self._values = 0
        self.inputs = [self._describe_input(index, value) for index, value in enumerate(inputs)]
        #: Kernel launches from another thread or on another stream than the call's.
        self.elsewhere: list[str] = []
        self._thread = 0
        self._stream: int | None = None

    # -- references --------------------------------------------------------------------

    def _bind(self, tensor: torch.Tensor, ref: tuple[str, int]) -> None:
        self._refs[tensor] = ref
        key = _storage_key(tensor)
        if self._storage(key) is None:
            self._storages[key] = _Held(ref, tensor)

    def _storage(self, key: tuple[str, int]) -> tuple[str, int] | None:
        """The reference of the live tensor that first had the storage at ``key``."""
        held = self._storages.get(key)
        if held is None:
            return None
        if not held.alive():
            del self._storages[key]  # freed during the call: the address is someone else's now
            return None
        return held.ref

    def pointer(self, address: int, one_past_end: bool = True) -> tuple[list[Any], int] | None:
        """The tensor a raw device address points into, as ``(reference, offset)``: the
        offset in bytes from that tensor's first element; None when no live tensor of the
        call holds it. An address one past a storage's end counts as that storage's when
        no storage starts there (unless ``one_past_end`` is false: a table's addresses
        are loaded through)."""
        if not address:
            return None
        past_end = None
        for key, held in list(self._storages.items()):
            if not held.end or not held.alive():
                continue
            if held.start <= address < held.end:
                return list(held.ref), address - held.origin
            if one_past_end and address == held.end and key[0] != "cpu":
                past_end = (list(held.ref), address - held.origin)
        return past_end

    def _describe_input(self, index: int, value: Any) -> dict[str, Any]:
        if isinstance(value, torch.Tensor):
            self._bind(value, ("in", index))
            return {"kind": "tensor", "dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape), "stride": list(value.stride())}
        return {"kind": "value", "value": self.encode(value)}

    def _new_value(self, tensor: torch.Tensor) -> tuple[str, int]:
        ref = ("val", self._values)
        self._values += 1
        self._bind(tensor, ref)
        return ref

    def ref(self, tensor: torch.Tensor) -> dict[str, Any]:
        """The reference of a tensor the forward uses: known, an alias of a known
        tensor's memory made outside torch's dispatcher, or a new constant."""
        if type(tensor) is not torch.Tensor and not isinstance(tensor, torch.nn.Parameter):
            raise NotReplayable(f"the forward used a tensor of type {type(tensor).__name__}; only plain torch.Tensor values can be replayed", "output_type")
        known = self._refs.get(tensor)
        if known is not None:
            return {"t": list(known)}
        base_ref = self._storage(_storage_key(tensor))
        if base_ref is not None:
            with self.suspend():
                alias = tensor  # re-create the same view of the known tensor's memory
                step = {
                    "kind": "op",
                    "op": ["aten", "as_strided", "default"],
                    "args": [{"t": list(base_ref)}, list(tensor.shape), list(tensor.stride()), tensor.storage_offset()],
                    "kwargs": {},
                }
            ref = self._new_value(alias)
            step["out"] = {"t": list(ref)}
            self.steps.append(step)
            return {"t": list(ref)}
        data = tensor.detach()
        size = data.untyped_storage().nbytes() if data.numel() else 0
        self.constant_bytes += size
        if self.constant_bytes > self.max_constant_bytes:
            raise NotReplayable(f"the module holds more than {self.max_constant_bytes >> 20} MiB of tensors (parameters and buffers)")
        whole = not size or (data.is_contiguous() and data.storage_offset() == 0 and data.numel() * data.element_size() == size)
        with self.suspend():
            if not whole:
                # A view of part of its storage, or a non-contiguous one (a parameter's
                # halves ``bias.chunk(2)``, a cached ``weight.T``, a slice of a kept
                # workspace): the whole storage is the constant, and this view and every
                # later one of it are re-made on it with their own sizes, strides and offsets.
                data = torch.empty(0, dtype=data.dtype, device=data.device).set_(data.untyped_storage(), 0, (size // data.element_size(),), (1,))
            if self.keep_constants:
                # Made in the memory file the parent lent for this reply where there is one
                # (wire.LentFile.empty): the reply then names it where it lies, not copied again.
                copy = lent_empty(tuple(data.shape), data.dtype)
                copy = data.to("cpu", copy=True) if copy is None else copy.copy_(data)
            else:
                copy = torch.empty(data.shape, dtype=data.dtype, device="meta")
        index = len(self.constants)
        self.constants.append(copy)
        if data.device.type == "cpu":
            self.host_constants.append(index)
        if not whole:
            self._bind(data, ("const", index))
            return self.ref(tensor)
        self._bind(tensor, ("const", index))
        return {"t": ["const", index]}

    def encode(self, value: Any, launch: bool = False) -> Any:
        """``value`` as plan data: tensors become references, torch's enums their names.

        :param launch: ``value`` is a kernel launch's argument, where Triton's host-side
            wrappers of a tensor may be too: ``triton.reinterpret(x, dtype)`` (a
            ``TensorWrapper``: ``{"tl_reinterpret": [ref, dtype]}``), a host TMA
            ``TensorDescriptor`` (``{"tl_descriptor": {"base": ref, "shape": ...}}``)
            and a ``@triton.jit`` function given as a constexpr (``FN=relu``:
            ``{"tl_jit": name}``, the executor's own build of the source's function of
            that name).
        """
        if isinstance(value, torch.Tensor):
            return self.ref(value)
        if launch:
            wrapped = self._encode_triton_wrapper(value)
            if wrapped is not None:
                return wrapped
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return {"py": (int if isinstance(value, torch.SymInt) else float if isinstance(value, torch.SymFloat) else bool)(value)}
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        if isinstance(value, torch.layout):
            return {"layout": str(value).removeprefix("torch.")}
        if isinstance(value, torch.memory_format):
            return {"memory_format": str(value).removeprefix("torch.")}
        if isinstance(value, torch.Size):
            return {"tuple": [int(v) for v in value]}
        if isinstance(value, tuple):
            return {"tuple": [self.encode(v, launch) for v in value]}
        if isinstance(value, list):
            return [self.encode(v, launch) for v in value]
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {"dict": {k: self.encode(v, launch) for k, v in value.items()}}
        try:  # a Triton dtype given as a constexpr (tl.float16)
            import triton.language as tl

            if isinstance(value, tl.dtype):
                return {"tl_dtype": value.name}
            if isinstance(value, tl.constexpr):
                return self.encode(value.value, launch)
        except ImportError:
            pass
        if type(value).__name__ == "complex":
            raise NotReplayable("the forward passed a complex number")
        raise NotReplayable(f"the forward passed a value of type {type(value).__module__}.{type(value).__qualname__}, which a plan cannot describe")

    def _encode_triton_wrapper(self, value: Any) -> Any:
        """A ``TensorWrapper`` or ``TensorDescriptor`` of Triton's as plan data, or None
        for anything else (Triton's modules are looked up only if already imported)."""
        import sys

        jit = sys.modules.get("triton.runtime.jit")
        wrapper = getattr(jit, "TensorWrapper", None)
        if wrapper is not None and type(value) is wrapper:
            if not isinstance(value.base, torch.Tensor):
                raise NotReplayable("the forward passed triton.reinterpret of something other than a tensor")
            return {"tl_reinterpret": [self.ref(value.base), self.encode(value.dtype)]}
        functions = tuple(
            kind for kind in (getattr(jit, "JITFunction", None), getattr(sys.modules.get("triton.runtime.interpreter"), "InterpretedFunction", None))
            if isinstance(kind, type)
        )
        if functions and isinstance(value, functions):
            # Named as the launch path names kernels: the trusted side looks the name up
            # among the functions it built from the source, so only the source's own can be.
            function = getattr(value, "fn", None)
            qualname, name = getattr(function, "__qualname__", None), getattr(function, "__name__", None)
            named = qualname if isinstance(qualname, str) and qualname and "<" not in qualname else name
            if not isinstance(named, str) or not named:
                raise NotReplayable("the forward passed a Triton function without a name")
            return {"tl_jit": named}
        descriptors = sys.modules.get("triton.tools.tensor_descriptor")
        descriptor = getattr(descriptors, "TensorDescriptor", None)
        if descriptor is not None and type(value) is descriptor:
            if not isinstance(value.base, torch.Tensor):
                raise NotReplayable("the forward passed a TensorDescriptor whose base is not a tensor")
            return {
                "tl_descriptor": {
                    "base": self.ref(value.base),
                    "shape": [int(v) for v in value.shape],
                    "strides": [int(v) for v in value.strides],
                    "block_shape": [int(v) for v in value.block_shape],
                    "padding": str(value.padding),
                    "round_f32_to_tf32": bool(value.round_f32_to_tf32),
                }
            }
        return None

    def _bind_outputs(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return {"t": list(self._new_value(value))}
        if isinstance(value, (tuple, list)):
            return {"tuple": [self._bind_outputs(v) for v in value]}
        if value is None or isinstance(value, (bool, int, float)):
            return {"py": value}
        return {"py": None}

    # -- recording ---------------------------------------------------------------------

    @contextlib.contextmanager
    def suspend(self) -> Iterator[None]:
        """Nothing inside is recorded (a backend's own launch machinery)."""
        self.suspended += 1
        try:
            yield
        finally:
            self.suspended -= 1

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.suspended:
            return func(*args, **kwargs)
        namespace = getattr(func, "namespace", "")
        name = func._schema.name.split("::", 1)[1]
        if namespace == "profiler" and name in PROFILER_RANGES:
            # A named range for the profiler (``torch.profiler.record_function``, as
            # instrumented kernels carry): it computes nothing, and the replay leaves it out.
            return func(*args, **kwargs)
        if namespace != "aten":
            # A custom operator (torch.library.custom_op, triton_op): record what its
            # Python implementation does, not the operator, which the executor cannot run.
            implementation = _custom_op_function(func)
            if implementation is None:
                raise NotReplayable(f"the forward called the operator {func} (only torch's aten operators and Python custom operators can be replayed)")
            with self:
                return implementation(*args, **kwargs)
        if is_composite(func):
            # Under torch.inference_mode the dispatcher hands a mode composite operators
            # whole (linear, reshape, contiguous, instance_norm); elsewhere they arrive
            # decomposed. They are recorded decomposed always, so that a plan never needs
            # one (plans.resolve_operator refuses them: what one writes inside, as
            # instance_norm writes its running statistics through native_batch_norm, its
            # schema does not say; red-team round 24).
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        if name == "set_" and len(args) >= 2 and isinstance(args[1], torch.UntypedStorage):
            # Onto a storage (cuDNN's RNNs take the flat buffer their weights lie in so,
            # ``at::empty({0}).set_(weight.storage())``, inside nn.LSTM's forward on a GPU):
            # recorded as ``set_`` onto a tensor of self's dtype made the same way over
            # that storage, which a plan names (a constant, or a view of a known tensor).
            with self.suspend():
                source = torch.empty(0, dtype=args[0].dtype, device=args[0].device).set_(*args[1:], **kwargs)
            func, args, kwargs = torch.ops.aten.set_.source_Tensor, (args[0], source), {}
        host_data = name == "lift_fresh" and args and self._refs.get(args[0]) is None and self._storage(_storage_key(args[0])) is None
        if host_data:
            # ``torch.tensor(0.0)``, ``as_tensor``, ``new_tensor``: made outside the
            # dispatcher from Python data, so a constant of the plan, which lives as long as
            # the replay. Each call of the forward makes it afresh, so a replay copies it
            # each call (a kernel accumulating into it must not find the last call's sum).
            name = "lift_fresh_copy"
        encoded_args = self.encode(list(args))
        encoded_kwargs = {key: self.encode(value) for key, value in kwargs.items()}
        self.in_op += 1
        try:
            output = func(*args, **kwargs)
        finally:
            self.in_op -= 1
        self.steps.append(
            {"kind": "op", "op": ["aten", name, func._overloadname], "args": encoded_args, "kwargs": encoded_kwargs, "out": self._bind_outputs(output)}
        )
        if host_data:
            self._address_table(args[0], self.steps[-1]["out"])
        return output

    def _address_table(self, data: torch.Tensor, out: Any) -> None:
        """Record which elements of a tensor made from host data are addresses inside
        tensors of the call (``torch.tensor([a.data_ptr(), ...])``, Triton tutorial 8's
        grouped GEMM): an ``addresses`` step right after the one that made ``out``, each
        such element as ``[index, reference, offset]`` (the offset in bytes from the
        tensor's first element). The replay writes its own tensors' addresses there; the
        recorded numbers are this process's, which mean nothing to the executor. An
        element that no tensor of the call holds stays a number."""
        if data.dtype not in (torch.int64, torch.uint64) or not 0 < data.numel() <= MAX_TABLE_ENTRIES or not (isinstance(out, dict) and "t" in out):
            return
        with self.suspend():
            values = data.detach().reshape(-1).tolist()
        entries = []
        for index, value in enumerate(values):
            hit = self.pointer(value, one_past_end=False) if value >= _SMALLEST_ADDRESS else None
            if hit is not None:
                entries.append([index, {"t": hit[0]}, hit[1]])
        if entries:
            self.steps.append({"kind": "addresses", "table": out, "entries": entries})

    def add_kernel(self, backend: str, kernel: dict[str, Any], grid: Any, args: Sequence[Any], options: dict[str, Any]) -> None:
        import threading

        if threading.get_ident() != self._thread:
            self.elsewhere.append(f"{kernel.get('name', 'a kernel')} was launched from another thread")
        elif self._stream is not None and _current_stream() != self._stream:
            self.elsewhere.append(f"{kernel.get('name', 'a kernel')} was launched on another CUDA stream than the caller's")
        grid_values = [int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,))]
        self.steps.append(
            {
                "kind": "kernel",
                "backend": backend,
                "kernel": kernel,
                "grid": grid_values,
                "args": [self.encode(a, launch=True) for a in args],
                "options": {key: self.encode(value, launch=True) for key, value in options.items()},
            }
        )

    def add_launch(self, backend: str, kernel: dict[str, Any], grid: Sequence[int], args: list[Any], options: dict[str, Any]) -> None:
        """Record one launch whose arguments are already plan data (a tracer's, which read
        them from the driver: raw bytes, and references for the pointers among them)."""
        self.steps.append({"kind": "kernel", "backend": backend, "kernel": kernel, "grid": [int(g) for g in grid], "args": args, "options": options})

    def call(self, forward: Any, inputs: Sequence[Any]) -> Any:
        """``forward(*inputs)`` with every torch operation and kernel launch recorded."""
        import threading

        self._thread = threading.get_ident()
        self._stream = _current_stream()
        _active.append(self)
        try:
            with contextlib.ExitStack() as tracers:
                for factory in TRACERS:
                    tracers.enter_context(factory(self))
                with self:
                    output = forward(*inputs)
            return output
        finally:
            _active.remove(self)

    def plan(self, output: Any) -> dict[str, Any]:
        """The plan of the recorded call that returned ``output``."""
        with self.suspend():
            outputs = self.encode(output)
        return {
            "version": PLAN_VERSION, "inputs": self.inputs, "steps": self.steps, "outputs": outputs,
            "constants": len(self.constants), "host_constants": list(self.host_constants),
        }
