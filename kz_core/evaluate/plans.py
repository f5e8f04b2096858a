"""Plans: validating them (they come from an untrusted process) and replaying them.

A plan (``kz_core/evaluate/recording.py`` makes them in the candidate's process) lists
the aten operations and kernel launches of one forward call, with references to the
tensors each reads and writes. :func:`validate_plan` checks one field by field before
anything else looks at it; :class:`Replay` runs it in the trusted executor, on inputs the
candidate never saw, and says what really happened:

- which torch operations computed (anything but allocation, views and copies, host
  arithmetic: a few elements no input reaches, such as ``torch.tensor(x.shape).prod()``,
  and a few single-element epilogues, such as a loss's ``acc / n``);
- how many kernels of the candidate's backend were launched;
- whether each output's bytes come from those kernels: every storage carries a flag,
  *kernel-derived*, set when a kernel of the candidate received it (inputs excepted: the
  executor checks that they are not modified), carried by torch's copies and views from
  what they read, and cleared when a torch operation overwrites it with what is not.

A kernel receives a tensor as an argument, or through an *address table*: a tensor made
from host data whose elements the recording found to be addresses inside tensors of the
plan (an ``addresses`` step; Triton tutorial 8's grouped GEMM). The replay writes its own
tensors' addresses there, and a launch given the table (or a copy of it) counts as given
every tensor it addresses, for all of the above and for a backend that checks where a
kernel's loads and stores reach (:func:`launch_table_memory`). A table gives a kernel
nothing it could not be given as an argument: only tensors of its own plan.

This module decides nothing about verdicts; it measures, and the parent judges.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from kz_core.evaluate.recording import MAX_TABLE_ENTRIES, PLAN_VERSION, in_dispatcher, is_composite

#: Limits on a plan from the candidate's process.
MAX_STEPS = 20_000
MAX_DEPTH = 12
MAX_ITEMS = 4096
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_DTYPES = frozenset(
    "float64 float32 float16 bfloat16 complex64 complex128 int64 int32 int16 int8 uint8 uint16 uint32 uint64 bool "
    "float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz".split()
)
_LAYOUTS = frozenset({"strided"})
_FORMATS = frozenset({"contiguous_format", "preserve_format", "channels_last", "channels_last_3d"})


class PlanError(ValueError):
    """A plan that is malformed (the message says where)."""


@dataclasses.dataclass(frozen=True)
class KernelRef:
    """A kernel of the candidate's source named as a launch's argument (a ``@triton.jit``
    function given as a constexpr): the backend's launch gives its own build of it."""

    name: str


def _check_value(value: Any, where: str, depth: int = 0, launch: bool = False) -> None:
    """A plan value: numbers, strings, lists and the tagged forms ``recording.encode`` makes.

    :param launch: ``value`` is a kernel launch's argument or option, where Triton's
        ``tl_reinterpret``, ``tl_descriptor`` and ``tl_jit`` forms may be too (never an op's)."""
    if depth > MAX_DEPTH:
        raise PlanError(f"{where}: nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        if isinstance(value, str) and len(value) > 4096:
            raise PlanError(f"{where}: string too long")
        return
    if isinstance(value, float):
        return
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise PlanError(f"{where}: list too long")
        for index, item in enumerate(value):
            _check_value(item, f"{where}[{index}]", depth + 1, launch)
        return
    if not isinstance(value, dict) or len(value) != 1:
        raise PlanError(f"{where}: unexpected value of type {type(value).__name__}")
    (tag, content), = value.items()
    if tag == "t":
        _check_ref(content, where)
    elif tag == "tuple":
        _check_value(content if isinstance(content, list) else None, where, depth + 1, launch)
        if not isinstance(content, list):
            raise PlanError(f"{where}: a tuple must hold a list")
    elif tag == "dict":
        if not isinstance(content, dict) or len(content) > MAX_ITEMS or not all(isinstance(k, str) and _NAME.match(k) for k in content):
            raise PlanError(f"{where}: malformed keyword dict")
        for key, item in content.items():
            _check_value(item, f"{where}.{key}", depth + 1, launch)
    elif tag == "py":
        if content is not None and not isinstance(content, (bool, int, float)):
            raise PlanError(f"{where}: malformed number")
    elif tag == "dtype" and content in _DTYPES:
        pass
    elif tag == "device" and isinstance(content, str) and re.match(r"^(cpu|cuda(:\d{1,2})?|meta)$", content):
        pass
    elif tag == "layout" and content in _LAYOUTS:
        pass
    elif tag == "memory_format" and content in _FORMATS:
        pass
    elif tag == "tl_dtype" and isinstance(content, str) and _NAME.match(content):
        pass
    elif tag == "tl_reinterpret" and launch:
        _check_reinterpret(content, where)
    elif tag == "tl_descriptor" and launch:
        _check_descriptor(content, where)
    elif tag == "tl_jit" and launch:
        if not (isinstance(content, str) and len(content) <= 1024 and all(_NAME.match(part) for part in content.split("."))):
            raise PlanError(f"{where}: malformed tl_jit (a kernel's qualified name)")
    else:
        raise PlanError(f"{where}: unknown or malformed tag {tag!r}")


#: Limits on a host TMA descriptor (``tl_descriptor``): Triton's own (rank 1 to 5) and
#: sizes far beyond any tensor a problem makes.
_DESCRIPTOR_FIELDS = frozenset({"base", "shape", "strides", "block_shape", "padding", "round_f32_to_tf32"})
_MAX_EXTENT = 2**40


def _is_ref(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and "t" in value


def _int_list(value: Any, rank: int, low: int, high: int) -> bool:
    return isinstance(value, list) and len(value) == rank and all(type(v) is int and low <= v <= high for v in value)


def _check_reinterpret(content: Any, where: str) -> None:
    """``triton.reinterpret(tensor, dtype)``: ``[tensor reference, dtype]``."""
    if not (isinstance(content, list) and len(content) == 2 and _is_ref(content[0])):
        raise PlanError(f"{where}: malformed tl_reinterpret (a tensor reference and a dtype)")
    _check_ref(content[0]["t"], where)
    dtype = content[1]
    if not (isinstance(dtype, dict) and len(dtype) == 1 and next(iter(dtype)) in ("tl_dtype", "dtype")):
        raise PlanError(f"{where}: malformed tl_reinterpret dtype")
    _check_value(dtype, where)


def _check_descriptor(content: Any, where: str) -> None:
    """A host ``TensorDescriptor``: its base (a tensor reference), shape, strides and
    block shape (small int lists of one rank, block sizes powers of two), padding and
    ``round_f32_to_tf32``, literals only."""
    if not (isinstance(content, dict) and set(content) == _DESCRIPTOR_FIELDS and _is_ref(content["base"])):
        raise PlanError(f"{where}: malformed tl_descriptor")
    _check_ref(content["base"]["t"], where)
    shape = content["shape"]
    rank = len(shape) if isinstance(shape, list) else 0
    if not 1 <= rank <= 5:
        raise PlanError(f"{where}: a tl_descriptor's rank must be 1 to 5")
    if not (_int_list(shape, rank, 1, _MAX_EXTENT) and _int_list(content["strides"], rank, 0, _MAX_EXTENT)):
        raise PlanError(f"{where}: malformed tl_descriptor shape or strides")
    block = content["block_shape"]
    if not (_int_list(block, rank, 1, 2**16) and all(b & (b - 1) == 0 for b in block) and math.prod(block) <= 2**20):
        raise PlanError(f"{where}: a tl_descriptor's block shape must be powers of two")
    if content["padding"] not in ("zero", "nan") or type(content["round_f32_to_tf32"]) is not bool:
        raise PlanError(f"{where}: malformed tl_descriptor padding or round_f32_to_tf32")


def _input_extent(spec: Any) -> int:
    """The bytes an input tensor's elements span from its first one (0 for a value, or a
    malformed or empty spec)."""
    import torch

    if not (isinstance(spec, dict) and spec.get("kind") == "tensor" and spec.get("dtype") in _DTYPES):
        return 0
    shape, stride = spec.get("shape"), spec.get("stride")
    rank = len(shape) if isinstance(shape, list) else -1
    if not (0 <= rank <= 64 and _int_list(shape, rank, 0, _MAX_EXTENT) and _int_list(stride, rank, 0, _MAX_EXTENT)) or 0 in shape:
        return 0
    return (1 + sum((n - 1) * st for n, st in zip(shape, stride))) * getattr(torch, spec["dtype"]).itemsize


def _check_addresses(step: dict[str, Any], where: str, previous: Any, inputs: list[Any]) -> None:
    """An ``addresses`` step: the table (the value the step before made from host data
    with ``lift_fresh_copy``) and its entries ``[index, tensor reference, offset]``, at
    most :data:`MAX_TABLE_ENTRIES`, indices increasing, offsets bounded (an input's inside
    its elements; any other tensor's are checked against its memory when replayed)."""
    if set(step) != {"kind", "table", "entries"}:
        raise PlanError(f"{where}: unexpected fields")
    table = step["table"]
    if not (_is_ref(table) and isinstance(table["t"], list) and table["t"][:1] == ["val"]):
        raise PlanError(f"{where}: an address table must be a value of the forward")
    _check_ref(table["t"], where)
    made = isinstance(previous, dict) and previous.get("kind") == "op" and previous.get("op") == ["aten", "lift_fresh_copy", "default"]
    if not (made and previous.get("out") == table):
        raise PlanError(f"{where}: an address table must be the tensor the step before made from host data")
    entries = step["entries"]
    if not (isinstance(entries, list) and 1 <= len(entries) <= MAX_TABLE_ENTRIES):
        raise PlanError(f"{where}: malformed address table entries")
    last = -1
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 3 and type(entry[0]) is int and _is_ref(entry[1]) and type(entry[2]) is int):
            raise PlanError(f"{where}: malformed address table entry {entry!r}")
        index, ref, offset = entry[0], entry[1]["t"], entry[2]
        _check_ref(ref, where)
        if not last < index < MAX_TABLE_ENTRIES:
            raise PlanError(f"{where}: address table indices must increase, below {MAX_TABLE_ENTRIES}")
        last = index
        if not -_MAX_EXTENT <= offset < _MAX_EXTENT:
            raise PlanError(f"{where}: an address table offset out of range")
        if ref[0] == "in" and ref[1] < len(inputs) and not 0 <= offset < _input_extent(inputs[ref[1]]):
            raise PlanError(f"{where}: an address table entry points outside input {ref[1]}")


def _check_ref(ref: Any, where: str) -> None:
    if not (isinstance(ref, list) and len(ref) == 2 and ref[0] in ("in", "const", "val") and type(ref[1]) is int and 0 <= ref[1] < 10**7):
        raise PlanError(f"{where}: malformed tensor reference {ref!r}")


def validate_plan(plan: Any, backend: str, constants: int) -> dict[str, Any]:
    """``plan`` checked field by field; raises :class:`PlanError` on anything malformed.

    :param backend: the candidate's backend (its kernel steps must name it).
    :param constants: how many constant tensors came with the plan.
    """
    if not isinstance(plan, dict) or plan.get("version") != PLAN_VERSION:
        raise PlanError("not a plan of this kz version")
    fields = {"version", "inputs", "steps", "outputs", "constants"}
    if set(plan) - {"host_constants"} != fields:
        raise PlanError(f"unexpected fields {sorted((set(plan) - {'host_constants'}) ^ fields)}")
    if plan["constants"] != constants:
        raise PlanError(f"the plan names {plan['constants']} constants, {constants} came with it")
    host = plan.get("host_constants", [])
    if not (isinstance(host, list) and all(type(i) is int and 0 <= i < constants for i in host) and len(set(host)) == len(host)):
        raise PlanError("malformed host_constants")
    inputs, steps = plan["inputs"], plan["steps"]
    if not isinstance(inputs, list) or len(inputs) > MAX_ITEMS or not isinstance(steps, list):
        raise PlanError("malformed inputs or steps")
    if len(steps) > MAX_STEPS:
        raise PlanError(f"{len(steps)} steps: more than {MAX_STEPS}")
    for index, spec in enumerate(inputs):
        if not isinstance(spec, dict) or spec.get("kind") not in ("tensor", "value"):
            raise PlanError(f"input {index}: malformed")
        if spec["kind"] == "value":
            _check_value(spec.get("value"), f"input {index}")
    values = 0

    def check_refs(value: Any) -> None:
        if isinstance(value, dict):
            for tag, content in value.items():
                if tag == "t":
                    kind, number = content
                    limit = {"in": len(inputs), "const": constants, "val": values}[kind]
                    if number >= limit:
                        raise PlanError(f"step {index}: reference {content} does not exist yet")
                elif isinstance(content, (list, dict)):
                    check_refs(content)
        elif isinstance(value, list):
            for item in value:
                check_refs(item)

    def count_outputs(value: Any) -> None:
        nonlocal values
        if isinstance(value, dict) and "t" in value:
            if value["t"] != ["val", values]:
                raise PlanError(f"step {index}: outputs must be numbered in order")
            values += 1
        elif isinstance(value, dict) and "tuple" in value:
            for item in value["tuple"]:
                count_outputs(item)

    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            raise PlanError(f"step {index}: malformed")
        kind = step.get("kind")
        if kind == "op":
            if set(step) != {"kind", "op", "args", "kwargs", "out"}:
                raise PlanError(f"step {index}: unexpected fields")
            op = step["op"]
            if not (isinstance(op, list) and len(op) == 3 and op[0] == "aten" and all(isinstance(p, str) and _NAME.match(p) for p in op[1:])):
                raise PlanError(f"step {index}: malformed operator {op!r}")
            _check_value(step["args"], f"step {index} arguments")
            if not isinstance(step["args"], list):
                raise PlanError(f"step {index}: arguments must be a list")
            if not isinstance(step["kwargs"], dict) or not all(isinstance(k, str) and _NAME.match(k) for k in step["kwargs"]):
                raise PlanError(f"step {index}: malformed keyword arguments")
            for key, item in step["kwargs"].items():
                _check_value(item, f"step {index} argument {key}")
            check_refs(step["args"])
            check_refs(step["kwargs"])
            _check_value(step["out"], f"step {index} outputs")
            count_outputs(step["out"])
        elif kind == "kernel":
            if set(step) != {"kind", "backend", "kernel", "grid", "args", "options"}:
                raise PlanError(f"step {index}: unexpected fields")
            if step["backend"] != backend:
                raise PlanError(f"step {index}: a kernel of backend {step['backend']!r} in a {backend!r} candidate")
            grid = step["grid"]
            if not (isinstance(grid, list) and 1 <= len(grid) <= 3 and all(type(g) is int and 0 <= g < 2**31 for g in grid)):
                raise PlanError(f"step {index}: malformed grid {grid!r}")
            if not isinstance(step["kernel"], dict):
                raise PlanError(f"step {index}: malformed kernel")
            for key, item in step["kernel"].items():
                if not (isinstance(key, str) and _NAME.match(key) and (isinstance(item, (str, int, bool)) or item is None)):
                    raise PlanError(f"step {index}: malformed kernel field {key!r}")
            if not isinstance(step["args"], list) or not isinstance(step["options"], dict):
                raise PlanError(f"step {index}: malformed arguments")
            _check_value(step["args"], f"step {index} arguments", launch=True)
            for key, item in step["options"].items():
                if not (isinstance(key, str) and _NAME.match(key)):
                    raise PlanError(f"step {index}: malformed option {key!r}")
                _check_value(item, f"step {index} option {key}", launch=True)
            check_refs(step["args"])
            check_refs(step["options"])
        elif kind == "addresses":
            _check_addresses(step, f"step {index}", steps[index - 1] if index else None, inputs)
            check_refs(step["table"])
            check_refs(step["entries"])
        else:
            raise PlanError(f"step {index}: unknown kind {kind!r}")
    _check_value(plan["outputs"], "outputs")
    index = len(steps)
    check_refs(plan["outputs"])
    return plan


# -- replay (in the trusted executor) ----------------------------------------------------

#: aten ops that move, view or allocate memory without computing.
from kz_core.evaluate.execution import NON_COMPUTE_OPS, fingerprint, secret_key, tensor_leaves  # noqa: E402

#: Ops that allocate without writing: what they return is poisoned in the trials.
_UNINITIALISED = frozenset(
    f"aten::{name}"
    for name in (
        "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
        "_empty_affine_quantized", "_empty_per_channel_affine_quantized", "empty_quantized",
    )
)


def poison_fresh(value: Any) -> None:
    """Every byte of each tensor's memory set (NaN in every floating dtype, -1 in integers;
    booleans True): what a forward allocated with ``torch.empty`` and never wrote reads
    back so, on any device, instead of whatever the allocator's memory held (often zeros
    on a CPU, where a kernel adding into an unzeroed output could pass)."""
    import torch

    for tensor in tensor_leaves(value):
        if tensor.dtype is torch.bool:
            tensor.fill_(True)
        else:
            torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage()).fill_(255)


#: Ops that write their ``self`` without filling it: what they grow is not written.
_SIZING = frozenset({"aten::resize_", "aten::resize_as_", "aten::set_", "aten::_resize_output_", "aten::resize_as_sparse_"})


def _filled(operator: Any, label: str, args: list[Any], kwargs: dict[str, Any], output: Any) -> set[int]:
    """The ids of the tensors an op writes as its result (``out=`` and in-place
    arguments: :func:`_written`), whose growth it fills; none for the ops that only size
    their ``self``."""
    if label in _SIZING:
        return set()
    return {id(tensor) for tensor, _ in _written(operator, args, kwargs, output)}


def _poison_growth(tensors: list[Any], states: list[tuple[int, int]], filled: set[int]) -> None:
    """:func:`poison_grown` for each tensor whose storage grew since ``states`` (not one
    that now has another storage: ``set_`` shares memory, it makes none); of a tensor the
    op wrote (``filled``), only the grown bytes outside the span it covers (an ``out=``
    view placed past its storage's end grows it far more than it writes)."""
    for tensor, (storage, before) in zip(tensors, states):
        if storage and _storage_state(tensor)[0] == storage:
            span = _byte_span(tensor) if id(tensor) in filled else None
            poison_grown(tensor, before, span)


def _check_bounds(output: Any, label: str) -> None:
    """Refuse a result that reaches past its storage (``_reshape_alias`` and
    ``_unsafe_view`` check no bounds): a plan may not read or write the executor's memory
    outside the tensors it has."""
    import torch

    for tensor in (output,) if type(output) is torch.Tensor else tensor_leaves(output):
        if tensor.layout is not torch.strided or tensor.numel() == 0:
            continue
        if tensor.is_contiguous():  # most results: their span is their elements (no stride is negative)
            end = (tensor.storage_offset() + tensor.numel()) * tensor.element_size()
        else:
            if any(stride < 0 for stride in tensor.stride()):
                raise PlanError(f"{label} returned a view past the end of its memory")
            end = _byte_span(tensor)[1]
        if end > _storage_state(tensor)[1]:
            raise PlanError(f"{label} returned a view past the end of its memory")


def _byte_span(tensor: Any) -> tuple[int, int]:
    """The bytes of its storage a strided tensor covers, ``(start, end)``."""
    size = tensor.element_size()
    start = tensor.storage_offset() * size
    if tensor.numel() == 0:
        return start, start
    extent = 1 + sum((n - 1) * abs(st) for n, st in zip(tensor.shape, tensor.stride()))
    return start, start + extent * size


def _storage_state(tensor: Any) -> tuple[int, int]:
    """Which storage a tensor has (the storage itself, which a resize keeps while it moves
    its memory) and its size in bytes; (0, 0) for a tensor without one (sparse)."""
    try:
        storage = tensor.untyped_storage()
        return storage._cdata, storage.nbytes()
    except (RuntimeError, NotImplementedError):
        return 0, 0


def poison_grown(tensor: Any, before: int, written: tuple[int, int] | None = None) -> None:
    """The bytes of ``tensor``'s memory past the first ``before`` set as
    :func:`poison_fresh` sets them (a ``resize_`` that grew it keeps only what was there),
    but for the ``written`` byte span, an op's own result."""
    import torch

    storage = tensor.untyped_storage()
    end = storage.nbytes()
    if end <= before:
        return
    raw = torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(storage)
    value = 1 if tensor.dtype is torch.bool else 255
    ranges = [(before, end)]
    if written is not None:
        ranges = [(before, min(end, max(before, written[0]))), (max(before, written[1]), end)]
    for start, stop in ranges:
        if stop > start:
            raw[start:stop].fill_(value)


#: In-place ops that overwrite their ``self`` without reading it.
_SELF_WRITE_ONLY = frozenset({"copy_", "fill_", "zero_"})
#: Ops that overwrite their first argument entirely when it covers its storage.
_OVERWRITING = _SELF_WRITE_ONLY | {"normal_", "uniform_"}


def _bound(args: list[Any], kwargs: dict[str, Any], index: int, name: str) -> Any:
    """The value an op was given for its schema's argument ``index`` (named ``name``)."""
    return args[index] if index < len(args) else kwargs.get(name)


def _write_only(operator: Any, label: str, args: list[Any], kwargs: dict[str, Any]) -> set[int]:
    """The storages an op writes without reading them: its ``out=`` arguments, and the
    ``self`` of ``copy_``, ``fill_`` and ``zero_``, unless another argument reads the
    same storage (``z.copy_(z)`` reads what it writes)."""
    keys: set[int] = set()
    read: set[int] = set()
    for index, argument in enumerate(operator._schema.arguments):
        writes = argument.alias_info is not None and argument.alias_info.is_write
        storages = {_storage_id(t) for t in tensor_leaves(_bound(args, kwargs, index, argument.name))}
        if writes and (argument.is_out or (index == 0 and label.split("::")[-1] in _SELF_WRITE_ONLY)):
            keys |= storages
        elif not writes:
            read |= storages
    return keys - read


def resolve_operator(op: Sequence[str]) -> Any:
    """The aten operator overload a plan step names."""
    import torch

    namespace, name, overload = op
    if namespace != "aten":
        raise PlanError(f"operator namespace {namespace!r} is not replayable")
    if not isinstance(name, str) or name.startswith("__"):
        raise PlanError(f"operator name {name!r} is not replayable")
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or not isinstance(packet, torch._ops.OpOverloadPacket):
        raise PlanError(f"torch has no operator aten::{name}")
    overload = overload or "default"
    # Only the packet's own overloads: any other attribute of it (``__setattr__``) named as
    # an overload would run in the trusted executor.
    if not isinstance(overload, str) or overload not in packet.overloads():
        raise PlanError(f"torch has no overload aten::{name}.{overload}")
    overload_fn = getattr(packet, overload)
    # Ops that open files: two mappings of one file are two storages over the same memory,
    # which the lineage (one storage, one memory) cannot follow; no wrapper needs them.
    if any(argument.name == "filename" for argument in overload_fn._schema.arguments):
        raise PlanError(f"aten::{name} opens a file, which a plan may not do")
    if not in_dispatcher(overload_fn):
        # A recording sees only the dispatcher's operators; one TorchScript alone registers
        # (``_grad_sum_to_size`` sums into fresh memory while its schema says it returns a
        # view of its argument: red-team round 25) is named only by a forged plan.
        raise PlanError(f"aten::{name}.{overload} is not an operator of torch's dispatcher, which a recording could hold")
    if is_composite(overload_fn):
        # torch decomposes it before a recording sees it (a recording decomposes it under
        # inference_mode too), so only a forged plan names one; run whole, it would write
        # what its schema does not say (``instance_norm`` updates its running statistics
        # through ``native_batch_norm``: red-team round 24's way past the checks).
        raise PlanError(f"aten::{name}.{overload} is a composite operator; a plan names the operators torch decomposes it into")
    return overload_fn


#: What a plan value must be in an operator argument of each non-tensor type: torch reads
#: a tensor's data for an ``int`` (``__index__``), so a tensor named where the schema has a
#: number would index by data that moving ops then carry (a 256-entry table looked up by
#: ``select`` computes anything); an ``int`` where a dtype belongs picks dtypes that plans
#: do not allow.
_TAGGED = {"ScalarType": "dtype", "Layout": "layout", "Device": "device", "MemoryFormat": "memory_format"}

#: The tensor arguments of moving ops whose data they move (or whose shape they read).
#: A moving op's overload with any other tensor argument takes positions from that
#: tensor's data (``narrow.Tensor``'s start, ``tensor_split``'s split points): a lookup
#: computes, so it counts as computing (host arithmetic on input-free values still passes).
_MOVED_ARGUMENTS = frozenset({"self", "other", "src", "tensors", "out", "value", "from", "source", "tensor", "the_template"})


def data_indexed(operator: Any) -> bool:
    """Whether an operator takes a tensor argument outside :data:`_MOVED_ARGUMENTS`."""
    return any("Tensor" in str(argument.type) and argument.name not in _MOVED_ARGUMENTS for argument in operator._schema.arguments)


def check_step_arguments(operator: Any, args: list[Any], kwargs: dict[str, Any], where: str) -> None:
    """A plan step's encoded arguments against its operator's schema: a tensor only where
    the schema has a tensor, a tagged dtype, layout, device or memory format where it has
    one of those. Raises :class:`PlanError`."""
    schema = operator._schema
    by_name = {argument.name: argument for argument in schema.arguments}
    if len(args) > len(schema.arguments) or any(name not in by_name for name in kwargs):
        raise PlanError(f"{where}: arguments that aten::{schema.name.split('::')[1]} does not take")
    for argument, value in [*zip(schema.arguments, args), *((by_name[name], value) for name, value in kwargs.items())]:
        kind = str(getattr(argument, "real_type", argument.type)).removeprefix("Optional[").removesuffix("]")
        if "Tensor" in kind:
            continue
        if _tensor_refs(value):
            raise PlanError(f"{where}: a tensor given for {argument.name} ({argument.type}) of aten::{schema.name.split('::')[1]}")
        tag = _TAGGED.get(kind)
        if tag and value is not None and not (isinstance(value, dict) and tag in value):
            raise PlanError(f"{where}: {argument.name} of aten::{schema.name.split('::')[1]} must be a {tag}, not {value!r}")


def operator_label(op: Sequence[str]) -> str:
    return f"aten::{op[1]}"


#: A computing op on values no input reaches, each tensor of it (arguments and results)
#: at most this many elements, is host arithmetic, not the problem's work: the shape
#: arithmetic of ``int(torch.prod(torch.tensor(x.shape)))``, a scale from
#: ``torch.sqrt(torch.tensor(head_dim))``. Larger, it computes.
HOST_ARITHMETIC_ELEMENTS = 64
#: And at most this many such ops a call (more count as computing): a wrapper's shape and
#: scale arithmetic takes a handful. A bound in depth: the lineage already keeps input
#: data out of them, but memory a kernel writes through an address it was not given is
#: out of the plan's sight.
HOST_ARITHMETIC_STEPS = 32

#: A computing op on what an input reached is an epilogue, not the problem's work, when
#: every tensor of it is a single element and the call has made no more than this many
#: such ops: a loss's division of its kernel-computed sum by the count (``acc / n``).
SCALAR_EPILOGUE_STEPS = 4


def _descriptor(base: Any, content: dict[str, Any]) -> Any:
    """The ``TensorDescriptor`` a validated ``tl_descriptor`` describes, over ``base``.
    What it addresses (its shape and strides from the base's first element) must lie in
    the base's storage: on a GPU, TMA checks bounds against the descriptor only."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    if not isinstance(base, torch.Tensor):
        raise PlanError("a tl_descriptor's base is not a tensor")
    shape, strides = list(content["shape"]), list(content["strides"])
    last = base.storage_offset() + sum((size - 1) * stride for size, stride in zip(shape, strides))
    if base.device.type != "meta" and (last + 1) * base.element_size() > base.untyped_storage().nbytes():
        raise PlanError("a tl_descriptor addresses memory outside its base tensor's storage")
    try:
        return TensorDescriptor(base, shape, strides, list(content["block_shape"]), content["padding"], content["round_f32_to_tf32"])
    except (AssertionError, TypeError, ValueError) as exc:
        raise PlanError(f"malformed tl_descriptor: {exc}") from None


def _reinterpreted_bases(value: Any) -> list[Any]:
    """The base tensors of the ``triton.reinterpret`` wrappers in kernel arguments
    ``value`` whose dtype is not their base's (an unknown dtype counts as another)."""
    import sys

    wrapper = getattr(sys.modules.get("triton.runtime.jit"), "TensorWrapper", None)
    if wrapper is None:
        return []
    if isinstance(value, (list, tuple)):
        return [base for item in value for base in _reinterpreted_bases(item)]
    if isinstance(value, dict):
        return [base for item in value.values() for base in _reinterpreted_bases(item)]
    if type(value) is not wrapper:
        return []
    try:
        from triton._utils import canonicalize_dtype

        same = canonicalize_dtype(value.dtype) == canonicalize_dtype(value.base.dtype)
    except Exception:  # noqa: BLE001 - a dtype Triton does not name: another one
        same = False
    return [] if same else [value.base]


#: The tensors the launch being made now reaches through address tables among its
#: arguments (set by :class:`Replay` around each launch; :func:`launch_table_memory`).
_TABLE_MEMORY: list[list[Any]] = [[]]


def launch_table_memory() -> list[Any]:
    """The tensors whose addresses the replay wrote into the address tables that the
    kernel being launched now was given (empty outside a launch, or without tables): a
    backend that checks where a kernel's loads and stores reach counts their memory as
    given to the launch, as it counts its tensor arguments'."""
    return list(_TABLE_MEMORY[0])


def _write_addresses(table: Any, entries: list[list[Any]], tensors: list[Any]) -> None:
    """Write into ``table`` (what a validated ``addresses`` step names) the replay's own
    address of each entry: its tensor's first element plus the recorded offset, which
    must lie inside that tensor's memory. One ``fill_`` with a number per element: under
    CUDA-graph capture the graph keeps it, as it keeps the addresses of the memory it
    allocated (a copy from pageable host memory could not be captured)."""
    import torch

    if not (isinstance(table, torch.Tensor) and table.layout is torch.strided and table.dtype in (torch.int64, torch.uint64) and table.is_contiguous()):
        raise PlanError("an address table is not a contiguous int64 or uint64 tensor")
    flat = table.view(-1)
    for (index, _, offset), tensor in zip(entries, tensors):
        if index >= flat.numel():
            raise PlanError("an address table entry lies past the table's end")
        if not (isinstance(tensor, torch.Tensor) and tensor.layout is torch.strided) or tensor.device.type == "meta":
            raise PlanError("an address table entry names no tensor with memory")
        storage = tensor.untyped_storage()
        address = tensor.data_ptr() + offset
        if not storage.data_ptr() <= address < storage.data_ptr() + storage.nbytes():
            raise PlanError("an address table entry points outside its tensor's memory")
        flat[index].fill_(address)


def _through_tables(value: Any, tables: dict[int, dict[int, Any]]) -> list[Any]:
    """The tensors that the address tables among the tensors of ``value`` address."""
    found: dict[int, Any] = {}
    for tensor in tensor_leaves(value):
        found.update(tables.get(_storage_id(tensor), {}))
    return list(found.values())


def _carry_tables(operator: Any, args: list[Any], kwargs: dict[str, Any], output: Any, tables: dict[int, dict[int, Any]], held: list[Any]) -> None:
    """What an op wrote or made from an address table's bytes (``table.to(device)``, a
    ``clone``) holds the same addresses: a table of the same tensors (held for the call,
    so that no later allocation takes its storage's address)."""
    reached = _through_tables([args, kwargs], tables)
    if not reached:
        return
    for tensor, _ in _written(operator, args, kwargs, output):
        tables.setdefault(_storage_id(tensor), {}).update({id(t): t for t in reached})
        held.append(tensor)


def _tensor_refs(value: Any) -> list[tuple[str, int]]:
    """The tensors a plan value names: ``(kind, number)`` of each ``{"t": [kind, n]}``."""
    found: list[tuple[str, int]] = []
    if isinstance(value, list):
        for item in value:
            found += _tensor_refs(item)
    elif isinstance(value, dict):
        ref = value.get("t")
        if len(value) == 1 and isinstance(ref, list) and len(ref) == 2 and isinstance(ref[0], str) and type(ref[1]) is int:
            found.append((ref[0], ref[1]))
        else:
            for item in value.values():
                found += _tensor_refs(item)
    return found


class Replay:
    """Replays plans on a device with the candidate's kernels (trusted side).

    :param launch: ``launch(step, args, options)`` launches one kernel step with its
        arguments resolved (the backend's ``backend_kernels`` object).
    """

    def __init__(
        self, plan: dict[str, Any], constants: list[Any], launch: Callable[[dict[str, Any], list[Any], dict[str, Any]], None], device: str,
        reinterpreting: bool | Callable[[dict[str, Any]], bool] = True,
        reinterpreted_now: Callable[[dict[str, Any]], bool] | None = None,
    ):
        import torch

        self.plan = plan
        #: Whether a launched step's kernel may have read bytes as another dtype
        #: (``TrustedKernels.reinterprets``, asked after the launch).
        self.reinterpreting = reinterpreting if callable(reinterpreting) else (lambda step, _flag=bool(reinterpreting): _flag)
        #: Whether a step's kernel read bytes as another dtype at its launch just now
        #: (``TrustedKernels.reinterpreted_last``): one that does so in a timed call only,
        #: where the trials' poison is not, computes there (its bytes, unviewed in the
        #: trials, may meet a conversion that tests them).
        self.reinterpreted_now = reinterpreted_now or self.reinterpreting
        self._judged_reinterpreting: dict[int, bool] = {}
        self.launch = launch
        self.device = device
        # Constants stay where the forward had them: a shape made with torch.tensor on the
        # host and read back with int() must not become a device tensor whose read
        # synchronises the device (under CUDA-graph capture, a failed capture).
        host = set(plan.get("host_constants", ()))
        self.constants = [c.to("cpu" if i in host else device) if isinstance(c, torch.Tensor) else c for i, c in enumerate(constants)]
        self.operators = [resolve_operator(step["op"]) if step["kind"] == "op" else None for step in plan["steps"]]
        for index, (step, operator) in enumerate(zip(plan["steps"], self.operators)):
            if operator is not None:
                check_step_arguments(operator, step["args"], step["kwargs"], f"step {index}")
        self._labels = [operator_label(step["op"]) if step["kind"] == "op" else "" for step in plan["steps"]]
        self.launches = sum(1 for step in plan["steps"] if step["kind"] == "kernel")
        self.release = release_schedule(plan)
        # A computing step counts once a replay runs it on more than host arithmetic (on
        # memory no input's data reached, small) or a scalar epilogue allows. Judged on the
        # real storages as the replay runs (a lineage over the plan's references missed
        # memory that ``set_`` shares); timing turns it off (``judging``): the same plan,
        # the same shapes, already judged in the trials, and nothing added to a timed call.
        self.judging = True
        self._computing_steps = {
            index: label
            for index, (label, operator) in enumerate(zip(self._labels, self.operators))
            if label and (label not in NON_COMPUTE_OPS or data_indexed(operator))
        }
        self._host_read_steps = {
            index for index, step in enumerate(plan["steps"])
            if self._labels[index] in _HOST_READS and not _binds_tensor(step["out"])
        }
        self._never_light = {index for index, step in enumerate(plan["steps"]) if step["kind"] == "op" and _never_light(self._labels[index])}
        self._computing: dict[str, None] = {}
        #: The most elements a step judged light read and made in any trial: a timed call
        #: (not judged) in which it reads or makes more computes beyond what was judged
        #: (``timed_compute_ops``), e.g. a size read from memory the trials poison.
        self._light_sizes: dict[int, int] = {}
        #: Each constant's fingerprint (by index) at the first judged call (as recorded).
        self._recorded_prints: dict[int, Any] | None = None
        #: Which constants (by index) a judged call gave to a kernel or an op that wrote
        #: them, or found changed: the others must hold what was recorded after timing.
        self._touched: set[int] = set()
        self.timed_compute_ops: dict[str, None] = {}
        #: What each step that read no input's data in every judged call (a fold, host
        #: arithmetic) wrote there, the last such call's: a timed call's step writes it,
        #: whatever its sources hold then. The trials can be told from timed calls (by
        #: their poison), and a kernel could write an input into a constant in a timed
        #: call only, for a fold to do its work, and put back what it wrote before the
        #: call ends.
        self._pinned: dict[int, list[Any]] = {}
        self._unpinned: set[int] = set()
        #: Steps whose conversion the trials' data judged a move (reinterpreted bytes
        #: sign-extended holding no negative value; integers made truth values, or bytes
        #: viewed as them, all 0 or 1): a timed call in which their bits decide something
        #: sets the flag (on the device, read after timing; the trials' poison tells the
        #: trials apart).
        self._watched: set[int] = set()
        self._bits_tested: dict[str, Any] = {}  # one flag per device: none is read back while timing
        #: Ops that read a value computed from the inputs back to the host (``item()``):
        #: the plan holds the number the recording saw, so what depends on it is replayed
        #: with that number (said beside a mismatch, the likely cause).
        self.host_reads: dict[str, None] = {}

    @property
    def compute_ops(self) -> list[str]:
        """The torch operations that computed in the replays so far: all but host
        arithmetic (:data:`HOST_ARITHMETIC_ELEMENTS`) and scalar epilogues
        (:data:`SCALAR_EPILOGUE_STEPS`)."""
        return list(self._computing)

    def untouched_constant_changed(self) -> bool:
        """Whether a constant that no judged call gave to a kernel or wrote holds other
        bytes than recorded (asked after the timed calls: a kernel that writes the input
        into a constant it was not given only when it is not judged, for torch to
        compute over it as a fold)."""
        import torch

        if self._recorded_prints is None:
            return False
        return any(
            fingerprint([c], secret_key())[0] != self._recorded_prints.get(i)
            for i, c in enumerate(self.constants)
            if isinstance(c, torch.Tensor) and i not in self._touched
        )

    def bits_tested_in_timed_calls(self) -> bool:
        """Whether a conversion that the trials' data judged a move tested bits in a timed
        call (asked after timing): a negative value sign-extended, or a truth value made
        from other than 0 or 1."""
        return any(bool(flag) for flag in self._bits_tested.values())

    def _watch(self, index: int, tensors: list[Any]) -> None:
        import torch

        self._watched.add(index)
        for tensor in tensors:
            if str(tensor.device) not in self._bits_tested:
                self._bits_tested[str(tensor.device)] = torch.zeros((), dtype=torch.bool, device=tensor.device)

    def _remember(self, index: int, pinned: bool, written: list[tuple[Any, bool]]) -> None:
        """Keep what a step that read no input's data (a fold, host arithmetic) wrote in
        this judged call, to be what it writes in the timed calls, while it reads none in
        every judged call: what it reads may hold other bytes there (memory a timed call's
        ``torch.empty`` recycles from a kernel's freed scratch is not poisoned)."""
        if pinned and index not in self._unpinned:
            self._pinned[index] = [t.detach().clone() for t, _ in written]
        else:
            self._unpinned.add(index)
            self._pinned.pop(index, None)

    def _pin(self, index: int, written: list[tuple[Any, bool]]) -> None:
        """In a timed call, what a step :meth:`_remember` kept wrote is set to what it
        wrote in the trials (the constants it reads may not hold what was recorded;
        checked after timing). One whose results differ in number, shape or dtype is
        computing there."""
        # Results on the device the last judged call made them on (after host constants
        # moved to the device there, the folds of later calls are there too).
        results = self._pinned[index]
        if len(written) != len(results) or any(t.shape != r.shape or t.dtype != r.dtype for (t, _), r in zip(written, results)):
            self.timed_compute_ops.setdefault(self._labels[index], None)
            return
        for (tensor, _), result in zip(written, results):
            tensor.copy_(result)

    def _judge_step(self, index: int, tensors: list[Any], input_free: bool, counts: list[int], label: str = "", folding: bool = False) -> None:
        """Count one computing step of a replay among the computing ops unless it is one
        of the call's first host arithmetic ops (``input_free``: no tensor it read holds
        memory an input's data reached) or scalar epilogues (``counts``: how many of each
        the call has made so far, updated). Ops over lists of tensors (``_foreach_*``)
        are neither: one of them does as much work as its lists are long."""
        sizes = [t.numel() for t in tensors]
        masked = self._labels[index] == "aten::index" and any(str(t.dtype) in ("torch.bool", "torch.uint8") for t in tensors)
        if index in self._never_light or masked or any(t.is_neg() or t.is_conj() for t in tensors):
            # A negative or conjugate bit: moving ops would compute with it. A result
            # whose shape is read from data (nonzero, a boolean mask) can be empty in the
            # trials and full in a timed call.
            light = False
        elif input_free:
            counts[0] += 1
            small = max(sizes, default=0) <= HOST_ARITHMETIC_ELEMENTS and sum(sizes) <= 4 * HOST_ARITHMETIC_ELEMENTS
            light = counts[0] <= HOST_ARITHMETIC_STEPS and (small or folding)
        else:
            counts[1] += 1
            light = counts[1] <= SCALAR_EPILOGUE_STEPS and max(sizes, default=0) <= 1 and len(sizes) <= 4
        if not light:
            self._computing.setdefault(label or self._computing_steps[index], None)
        else:
            self._light_sizes[index] = max(self._light_sizes.get(index, 0), sum(sizes))

    def precompile(self, precompile: Callable[[dict[str, Any], list[Any], dict[str, Any]], None]) -> bool:
        """Run the plan on ``meta`` tensors of the recorded input shapes, calling
        ``precompile`` for each kernel step instead of launching it: kernels compile before
        the trials, and nothing touches the device. False when the plan could not be run so
        (an operator without a meta implementation): kernels then compile at first launch."""
        import torch

        inputs: list[Any] = []
        for spec in self.plan["inputs"]:
            if spec["kind"] == "tensor":
                inputs.append(torch.empty_strided(spec["shape"], spec["stride"], dtype=getattr(torch, spec["dtype"]), device="meta"))
            else:
                inputs.append(self._decode(spec["value"], {"in": [], "const": [], "val": []}))
        constants = [c.to("meta") if isinstance(c, torch.Tensor) else c for c in self.constants]
        env: dict[str, list[Any]] = {"in": inputs, "const": constants, "val": []}
        saved = self.device
        self.device = "meta"
        try:
            for step, operator in zip(self.plan["steps"], self.operators):
                if step["kind"] == "addresses":  # meta tensors have no addresses
                    continue
                args = self._decode(step["args"], env)
                if step["kind"] == "kernel":
                    options = {k: self._decode(v, env) for k, v in step["options"].items()}
                    precompile(step, args, options)
                    continue
                kwargs = {k: self._decode(v, env) for k, v in step["kwargs"].items()}
                self._bind(step["out"], operator(*args, **kwargs), env)
        except Exception:  # noqa: BLE001 - compiling ahead is an optimisation only
            return False
        finally:
            self.device = saved
        return True

    def _decode(self, value: Any, env: dict[str, list[Any]]) -> Any:
        import torch

        if isinstance(value, list):
            return [self._decode(v, env) for v in value]
        if not isinstance(value, dict):
            return value
        (tag, content), = value.items()
        if tag == "t":
            kind, number = content
            return env[kind][number]
        if tag == "tuple":
            return tuple(self._decode(v, env) for v in content)
        if tag == "dict":
            return {k: self._decode(v, env) for k, v in content.items()}
        if tag == "py":
            return content
        if tag == "dtype":
            return getattr(torch, content)
        if tag == "device":
            if self.device == "meta":
                return torch.device("meta")
            return torch.device(self.device if content.startswith("cuda") else content)
        if tag == "layout":
            return getattr(torch, content)
        if tag == "memory_format":
            return getattr(torch, content)
        if tag == "tl_dtype":
            import triton.language as tl

            known = (*tl.dtype.SINT_TYPES, *tl.dtype.UINT_TYPES, *tl.dtype.FP_TYPES, *getattr(tl.dtype, "OTHER_TYPES", ()))
            if content not in known:
                raise PlanError(f"unknown Triton dtype {content!r}")
            return tl.dtype(content)
        if tag == "tl_reinterpret":  # triton.reinterpret(tensor, dtype): a kernel argument only
            from triton.runtime.jit import TensorWrapper

            base, dtype = self._decode(content[0], env), self._decode(content[1], env)
            if not isinstance(base, torch.Tensor):
                raise PlanError("a tl_reinterpret's base is not a tensor")
            return TensorWrapper(base, dtype)
        if tag == "tl_descriptor":  # a host TMA descriptor: a kernel argument only
            return _descriptor(self._decode(content["base"], env), content)
        if tag == "tl_jit":  # a jit function as a constexpr: the backend's launch resolves it
            return KernelRef(content)
        raise PlanError(f"unknown tag {tag!r}")

    @staticmethod
    def _bind(pattern: Any, value: Any, env: dict[str, list[Any]]) -> None:
        import torch

        if isinstance(pattern, dict) and "t" in pattern:
            if not isinstance(value, torch.Tensor):
                # The recorder binds tensors only (a scalar result is a literal): a plan
                # that names a number as a value would carry an input's data (``item()``)
                # past the lineage, which follows storages.
                raise PlanError(f"an operator returned a {type(value).__name__} where the plan names a tensor")
            if value.layout is not torch.strided:
                # A sparse tensor's values are memory of another tensor, out of the
                # lineage's sight; Triton kernels take strided tensors only.
                raise PlanError(f"an operator returned a {value.layout} tensor; a plan's tensors are strided")
            if value.is_quantized or str(value.dtype).removeprefix("torch.") not in _DTYPES:
                # A quantized tensor computes as bytes move into it (``copy_`` rounds,
                # scales and clamps): only the dtypes a plan may name.
                raise PlanError(f"an operator returned a {value.dtype} tensor, which plans do not allow")
            env["val"].append(value)
        elif isinstance(pattern, dict) and "tuple" in pattern:
            values = list(value) if isinstance(value, (tuple, list)) else []
            if len(values) != len(pattern["tuple"]):
                raise PlanError("an operator returned another number of values than when it was recorded")
            for item, got in zip(pattern["tuple"], values):
                Replay._bind(item, got, env)

    def __call__(self, *inputs: Any, provenance: dict[str, Any] | None = None) -> Any:
        """Run the plan on ``inputs``; returns what the forward returned.

        :param provenance: when given, filled with ``kernel_derived``: one bool per output
            leaf (its bytes come from the candidate's kernels) and ``writers``: for each
            output leaf, the last operation that wrote its storage.
        """
        import torch

        env: dict[str, list[Any]] = {"in": list(inputs), "const": self.constants, "val": []}
        track = provenance is not None
        derived: dict[int, bool] = {}
        writer: dict[int, str] = {}
        counts = [0, 0]  # host arithmetic ops, scalar epilogues (_judge_step)
        input_storages = {_storage_id(x) for x in inputs if isinstance(x, torch.Tensor)}
        judging = self.judging
        reached = set(input_storages)  # storages an input's data reached (judging only)
        tainted: set[int] = set()  # storages reached by input bytes viewed as another dtype (judging only)
        # Parameter folding (judging only): what the module's constants make through ops on
        # them alone (BatchNorm's weight / sqrt(running_var + eps)) passes as host
        # arithmetic at any size. A constant no kernel or op was given is fingerprinted (on a
        # GPU under this process's secret key: a kernel cannot balance what it writes), and
        # a change to it is computing (a kernel writing where it was not given); what was
        # folded from constants is dropped at every launch, which could write it.
        # Each constant's memory is held, by an alias, for the call (``set_`` may move the
        # constant itself elsewhere; its memory stays checked, and no allocation can take
        # its address while a key names it).
        indexed = {i: c.detach() for i, c in enumerate(self.constants) if isinstance(c, torch.Tensor)} if judging and self._computing_steps else {}
        by_index = {i: fingerprint([c], secret_key())[0] for i, c in indexed.items()}
        constants = {_storage_id(c): c for c in indexed.values()}
        prints = {_storage_id(c): by_index[i] for i, c in indexed.items()}
        # A constant is the module's only while it holds what was recorded, itself (not
        # another constant's bytes copied over it): one that a kernel it was given wrote in
        # an earlier call (the input kept for the next) is not. A storage is pristine while
        # every constant on it is.
        if indexed and self._recorded_prints is None:
            self._recorded_prints = dict(by_index)
        recorded = self._recorded_prints or {}
        pristine = set(constants) - {_storage_id(c) for i, c in indexed.items() if by_index[i] != recorded.get(i)}
        folded: set[int] = set()
        starts = [_storage_id(c) if constants and isinstance(c, torch.Tensor) else None for c in self.constants]
        moved_off_host = False  # whether an op copied host memory to the device (judging only)
        viewed: set[int] = set()  # storages whose bytes were viewed as another dtype (judging only)
        # Storages allocated without being written since (judging only): poison in the
        # trials, whatever the allocator hands back in a timed call (a kernel's freed
        # scratch holding the input), so bytes of no known dtype, as reinterpreted ones are.
        unwritten: set[int] = set()
        # Address tables (storage -> the tensors its addresses name, by id), and the tables
        # and tensors they name, held for the call: a kernel may reach them through a table
        # after the forward's last use of them, and no allocation may take their addresses.
        tables: dict[int, dict[int, Any]] = {}
        held: list[Any] = []

        for index, (step, operator) in enumerate(zip(self.plan["steps"], self.operators)):
            if step["kind"] == "addresses":
                table = self._decode(step["table"], env)
                named = [self._decode(entry[1], env) for entry in step["entries"]]
                _write_addresses(table, step["entries"], named)
                tables.setdefault(_storage_id(table), {}).update({id(t): t for t in named})
                if judging:
                    # The table now holds this call's addresses, not a constant's bytes: no
                    # fold starts from it and no step that reads it is pinned. Red-team round
                    # 29: ``table + 0``, a fold pinned in the trials, held a trial's address in
                    # timed calls, and a kernel comparing it with the table told them apart.
                    key = _storage_id(table)
                    reached.add(key)
                    folded.discard(key)
                    pristine.discard(key)
                held += [table, *named]
                del table, named
                continue
            args = self._decode(step["args"], env)
            if step["kind"] == "kernel":
                options = {k: self._decode(v, env) for k, v in step["options"].items()}
                # What the kernel reaches through its tables counts as given to it.
                through = _through_tables([args, options], tables) if tables else []
                _TABLE_MEMORY[0] = through
                try:
                    self.launch(step, args, options)
                finally:
                    _TABLE_MEMORY[0] = []
                if not judging and not self._judged_reinterpreting.get(index, True) and self.reinterpreted_now(step):
                    self.timed_compute_ops.setdefault("a kernel read bytes as another dtype in a timed call only", None)
                if judging:  # a kernel may write anything into what it receives
                    self._judged_reinterpreting[index] = self._judged_reinterpreting.get(index, False) or self.reinterpreted_now(step)
                    keys = {_storage_id(tensor) for tensor in tensor_leaves([args, options, through])}
                    reached.update(keys)
                    pristine -= keys
                    unwritten -= keys
                    folded.clear()
                    # Only a launch can write where it was not given: every constant still
                    # pristine is checked after each one (folding reads them later).
                    for key in [key for key in pristine if fingerprint([constants[key]], secret_key())[0] != prints[key]]:
                        pristine.discard(key)
                        self._computing.setdefault("a module constant that no kernel or op was given changed", None)
                    if keys & tainted:  # reinterpreted bits passed through a kernel stay so
                        tainted.update(keys)
                    if self.reinterpreting(step):  # a kernel that reads bytes as another dtype views them so
                        viewed.update(keys)
                    # triton.reinterpret(x, dtype) with another dtype than x's: the kernel
                    # reads x's bytes as that dtype, as a bitcast would (kz_core's view).
                    viewed.update(_storage_id(base) for base in _reinterpreted_bases([args, options]))
                if track:
                    for key in [_storage_id(tensor) for tensor in tensor_leaves([args, options, through])]:
                        if key not in input_storages:
                            derived[key] = True
                            writer[key] = f"kernel {step['kernel'].get('name', '')}"
                del args, options, through
            elif index in self._host_read_steps and not (judging or track):
                # A timed call reads nothing back: the plan holds the number the recording
                # saw, and a read of device memory would synchronise (under CUDA-graph
                # capture, a failed capture). The trials run it, to judge what it read.
                del args
            else:
                kwargs = {k: self._decode(v, env) for k, v in step["kwargs"].items()}
                read = tensor_leaves([args, kwargs]) if judging or track else []
                # Storage sizes before the op: what it grows is poisoned (trials) and unwritten (judging).
                sizes = [_storage_state(t) for t in read] if track or (judging and self._labels[index] in _SIZING) else []
                read_keys = [_storage_id(t) for t in read] if judging else []
                output = operator(*args, **kwargs)
                if track and self._labels[index] in _UNINITIALISED:
                    poison_fresh(output)  # trials only: a timed call pays for nothing of kz's
                elif track:
                    # Memory an op grew without writing (resize_, set_ with a size): poisoned
                    # like torch.empty's, whatever the op's name; not what an op wrote
                    # itself (``torch.cat(..., out=buffer)`` grows and fills its ``out``).
                    _poison_growth(read, sizes, _filled(operator, self._labels[index], args, kwargs, output))
                _check_bounds(output, self._labels[index])
                if tables:
                    _carry_tables(operator, args, kwargs, output, tables, held)
                self._bind(step["out"], output, env)
                if not judging and index in self._pinned:
                    self._pin(index, _written(operator, args, kwargs, output))
                if not judging and index in self._watched:
                    for tested in bits_tested(operator, self._labels[index], args, kwargs, output):
                        flag = self._bits_tested.get(str(tested.device))
                        if flag is None:  # a device the trials did not watch it on
                            self.timed_compute_ops.setdefault(self._labels[index], None)
                        else:
                            torch.logical_or(flag, tested, out=flag)
                if not judging and index in self._light_sizes:
                    if sum(t.numel() for t in tensor_leaves([args, kwargs, output])) > self._light_sizes[index]:
                        self.timed_compute_ops.setdefault(self._labels[index], None)
                if judging and not moved_off_host and any(t.device.type == "cpu" for t in read):
                    # Host memory copied to the device (``torch.tensor(...).to(x.device)``):
                    # under CUDA-graph capture a copy from pageable host memory fails, so
                    # later calls take the constants on the device, as copies do not.
                    moved_off_host = any(t.device.type != "cpu" for t in tensor_leaves(output))
                if judging:
                    input_free = not any(key in reached for key in read_keys)
                    _follow_lineage(operator, args, kwargs, output, read_keys, input_free, reached)
                    # A fold starts from the module's constants or from a factory's values
                    # (arange, ones, eye: an index table, a triangular mask), and reads
                    # nothing else.
                    factory = self._labels[index] in _FACTORIES
                    # Memory an op allocates without writing holds no constant's values,
                    # whatever it was shaped after (``c.new_empty(n)``): poison in the
                    # trials, in a timed call whatever the allocator hands back (a kernel's
                    # freed scratch holding the input), as ``torch.empty``'s does. What an
                    # op only writes (``out=``, the target of ``copy_``, ``fill_``,
                    # ``zero_``) is not what it folds from: ``torch.empty(C).fill_(eps)``
                    # and ``torch.rsqrt(v, out=torch.empty(C))`` fold, into memory no
                    # input's data reached.
                    targets = _write_only(operator, self._labels[index], args, kwargs)
                    sources = [key for key in read_keys if key not in targets]
                    # Memory allocated or grown (``resize_``) and not written since is read
                    # as the trials' poison there and as recycled bytes in a timed call: no
                    # fold reads it, and what is made from it carries bytes of no known dtype.
                    reads_unwritten = any(key in unwritten for key in sources)
                    folds = factory or (
                        bool(sources or targets)
                        and self._labels[index] not in _UNINITIALISED
                        and not reads_unwritten
                        and not targets & reached
                        and all(key in pristine or key in folded for key in sources)
                    )
                    # What an op wrote, where it lay before the op too (``set_`` moves it).
                    before = {id(t): key for t, key in zip(read, read_keys)}
                    changed = _written(operator, args, kwargs, output)
                    written = {_storage_id(t) for t, _ in changed} | {before[id(t)] for t, _ in changed if id(t) in before}
                    made = written | {_storage_id(t) for t in tensor_leaves(output)}
                    pristine -= written  # a view of a constant leaves it checked
                    unwritten -= {_storage_id(t) for t in tensor_leaves(output)} - set(read_keys)  # fresh memory, written
                    if self._labels[index] in _UNINITIALISED:
                        unwritten.update(_storage_id(t) for t in tensor_leaves(output))
                    elif self._labels[index] in _SIZING:  # what it grows is unwritten too
                        unwritten.update(_storage_id(t) for t, (_, was) in zip(read, sizes) if _storage_state(t)[1] > was)
                    else:
                        unwritten -= {_storage_id(t) for t, whole in changed if whole}
                    folded = (folded | (made - pristine)) if folds else (folded - made)
                    if index in self._computing_steps:
                        self._judge_step(index, tensor_leaves([args, kwargs, output]), input_free, counts, folding=folds)
                        self._remember(index, folds or input_free, changed)
                    elif self._labels[index] in _HOST_READS and not input_free:
                        self.host_reads.setdefault(self._labels[index], None)
                    elif converted := conversion(operator, self._labels[index], args, kwargs, output, taint := tainted | (viewed & reached) | unwritten):
                        # A moving op that converts values computes (a cast to an integer).
                        self._judge_step(index, tensor_leaves([args, kwargs, output]), input_free, counts, converted)
                        self._remember(index, input_free, changed)
                    elif spared_conversion(operator, self._labels[index], args, kwargs, output, taint):
                        self._watch(index, tensor_leaves([args, kwargs, output]))
                    elif reinterpreted := reinterpretation(self._labels[index], read, output):
                        # Viewed before input data reached it or after: tainted once both hold.
                        viewed.update(_storage_id(t) for t in tensor_leaves(output))
                        truths = [t for t in tensor_leaves(output) if str(t.dtype) == "torch.bool"]
                        if not input_free and truths and all(_zero_one(t.view(torch.uint8)) for t in truths):
                            self._watch(index, truths)  # a kernel's 0/1 bytes returned as bool
                        elif not input_free and truths:
                            self._judge_step(index, tensor_leaves([args, kwargs, output]), input_free, counts, reinterpreted)
                    if reads_unwritten or any(key in tainted or (key in viewed and key in reached) for key in read_keys):
                        tainted.update(_storage_id(t) for t in tensor_leaves(output))
                        tainted.update(_storage_id(t) for t, _ in changed)
                if track:
                    _track_writes(operator, step["op"], args, kwargs, output, derived, writer)
                del args, kwargs, output, read
            for number in self.release[index]:
                # Its last use: let it go, as the forward did (a KernelBench norm's four
                # intermediates of 6.4 GB each would otherwise live until the call ends).
                if number < len(env["val"]):
                    env["val"][number] = None
        # Constants a kernel or an op was given, wrote or found changed in a judged call.
        self._touched.update(i for i, key in enumerate(starts) if key is not None and key not in pristine)
        if moved_off_host:
            self.constants = [c.to(self.device) if isinstance(c, torch.Tensor) else c for c in self.constants]
        result = self._decode(self.plan["outputs"], env)
        if track:
            leaves = tensor_leaves(result)
            provenance["kernel_derived"] = [derived.get(_storage_id(t), False) for t in leaves]
            provenance["writers"] = [writer.get(_storage_id(t), "nothing (an input or a constant)") for t in leaves]
        return result


def _binds_tensor(pattern: Any) -> bool:
    """Whether a step's output pattern names a tensor (``{"t": ...}``, in a tuple too)."""
    if isinstance(pattern, dict) and "t" in pattern:
        return True
    return isinstance(pattern, dict) and "tuple" in pattern and any(_binds_tensor(p) for p in pattern["tuple"])


#: Ops whose result is a Python number or truth value read from a tensor's data.
_HOST_READS = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "aten::equal"})

#: Moving ops that allocate or reinterpret bytes as another dtype: they convert no value.
_REINTERPRETING = frozenset(
    f"aten::{name}"
    for name in (
        "view set_ view_as_real view_as_complex empty empty_like empty_strided empty_permuted new_empty new_empty_strided "
        "zeros zeros_like ones ones_like full full_like new_zeros new_ones new_full arange"
    ).split()
)


def _kind(dtype: Any) -> str:
    """A dtype's kind: b(ool), c(omplex), f(loat) or i(nteger)."""
    return "b" if str(dtype) == "torch.bool" else "c" if dtype.is_complex else "f" if dtype.is_floating_point else "i"


#: Arguments whose shape or dtype alone an op takes (``x.view_as(other)``).
_TEMPLATES = frozenset({"aten::view_as", "aten::expand_as", "aten::reshape_as", "aten::resize_as_", "aten::type_as", "aten::to"})


def conversion(operator: Any, label: str, args: list[Any], kwargs: dict[str, Any], output: Any, tainted: set[int] | None = None) -> str:
    """What a moving op computes by converting values ("" when nothing): a float made an
    integer or a truth value (truncation and the thresholds it makes decide on the data:
    bytes of ``[0, 0, top, 0x3F]`` truncated to an int are the sign test), or an integer
    made a truth value; and any conversion of bytes that were reinterpreted as another
    dtype (``tainted``: storages such bytes reached), where sign extension or rounding to
    float8 is a test on the bits. Floats made other floats (rounding) and integers made
    floats or other integers move values, as an honest ``x.float()`` or ``.to(x.dtype)``
    does."""
    sources, targets = _conversion_ends(operator, label, args, kwargs, output)
    for source in sources:
        for target in targets:
            a, b = _kind(source.dtype), _kind(target.dtype)
            bits = tainted is not None and _storage_id(source) in tainted and source.dtype != target.dtype and _tests_bits(source, target)
            if bits or (a in "fc" and b in "ib") or (a == "i" and b == "b" and not _zero_one(source)):
                return f"{label} ({str(source.dtype).removeprefix('torch.')} to {str(target.dtype).removeprefix('torch.')})"
    return ""


def _zero_one(tensor: Any) -> bool:
    """Whether every value of an integer tensor is 0 or 1: made truth values, they are
    what they were (a kernel's 0/1 mask returned as bool), and no bit is tested."""
    return tensor.numel() == 0 or bool(((tensor == 0) | (tensor == 1)).all())


def _conversion_ends(operator: Any, label: str, args: list[Any], kwargs: dict[str, Any], output: Any) -> tuple[list[Any], list[Any]]:
    """What a moving op converts values from (the tensors it reads, but a template whose
    dtype or shape alone it takes) and to (what it writes and returns); nothing for an op
    that only allocates or reinterprets bytes."""
    if label in _REINTERPRETING:
        return [], []
    sources: list[Any] = []
    for index, argument in enumerate(operator._schema.arguments):
        written = argument.alias_info is not None and argument.alias_info.is_write
        if "Tensor" in str(argument.type) and not written and not (label in _TEMPLATES and argument.name in ("other", "the_template")):
            sources += tensor_leaves(_bound(args, kwargs, index, argument.name))
    return sources, [tensor for tensor, _ in _written(operator, args, kwargs, output)] + tensor_leaves(output)


def _widened(sources: list[Any], targets: list[Any]) -> list[Any]:
    """The signed integer sources widened (to a wider integer or a float): a negative
    value among them is sign-extended (``_tests_bits``), whatever the data."""
    return [
        source for source in sources
        if _kind(source.dtype) == "i" and source.is_signed()
        and any(_kind(t.dtype) in "fc" or (_kind(t.dtype) == "i" and t.element_size() > source.element_size()) for t in targets)
    ]


def _made_truths(sources: list[Any], targets: list[Any]) -> list[Any]:
    """The integer sources made truth values (``.bool()``)."""
    return [t for t in sources if _kind(t.dtype) == "i"] if any(str(t.dtype) == "torch.bool" for t in targets) else []


def spared_conversion(operator: Any, label: str, args: list[Any], kwargs: dict[str, Any], output: Any, tainted: set[int]) -> bool:
    """Whether a moving op that :func:`conversion` judged a move did so on its values
    alone: it widens signed integers of reinterpreted bytes (``tainted``) holding no
    negative value, or makes truth values of integers that are all 0 or 1."""
    sources, targets = _conversion_ends(operator, label, args, kwargs, output)
    return any(_storage_id(t) in tainted for t in _widened(sources, targets)) or bool(_made_truths(sources, targets))


def bits_tested(operator: Any, label: str, args: list[Any], kwargs: dict[str, Any], output: Any) -> list[Any]:
    """For a step whose conversion the trials' data judged a move, whether this call's
    values test bits (0-dim bool tensors, computed on the device without reading them
    back): a signed integer widened holding a negative value, an integer made a truth
    value from other than 0 or 1, bytes viewed as bool other than 0 or 1."""
    import torch

    sources, targets = _conversion_ends(operator, label, args, kwargs, output)
    tested = [(source < 0).any() for source in _widened(sources, targets)]
    tested += [((source != 0) & (source != 1)).any() for source in _made_truths(sources, targets)]
    tested += [(t.view(torch.uint8) > 1).any() for t in tensor_leaves(output) if str(t.dtype) == "torch.bool" and t.numel()]
    return tested


def _tests_bits(source: Any, target: Any) -> bool:
    """Whether converting ``source``'s reinterpreted bytes to ``target``'s dtype can test
    them: rounding a float to a narrower one, or widening a signed integer that holds a
    negative value (sign extension spreads its top bit: 0xFF or 0x00 above a float's top
    byte is its sign). Widening floats and moving non-negative integers change no bit's
    meaning (an honest kernel's int32 indices made int64)."""
    a, b = _kind(source.dtype), _kind(target.dtype)
    if a in "fc":
        return b not in "fc" or target.element_size() < source.element_size()
    if a == "i":
        widening = b != "i" or target.element_size() > source.element_size()
        return (b == "b" and not _zero_one(source)) or (source.is_signed() and widening and bool((source < 0).any()))
    return False


def reinterpretation(label: str, read: list[Any], output: Any) -> str:
    """A view of a tensor's bytes as another dtype ("" when not): a result on the storage
    of a tensor the op read, in another dtype (``view(dtype)``, ``set_`` with an offset,
    ``view_as_real``). Its storage then holds bits that a conversion could test; viewed as
    bool it is the test itself (``!= 0``)."""
    for result in tensor_leaves(output):
        for tensor in read:
            if tensor.dtype != result.dtype and _storage_id(tensor) == _storage_id(result):
                return f"{label} ({str(tensor.dtype).removeprefix('torch.')} as {str(result.dtype).removeprefix('torch.')})"
    return ""


#: Views that set a tensor's negative or conjugate bit: a moving op that reads such a
#: tensor (``clone``, ``copy_``, ``resolve_neg``) computes the negation, and ``set_`` can
#: carry the bit onto other memory.
_BIT_VIEWS = frozenset({"_neg_view", "_conj", "conj"})


def _never_light(label: str) -> bool:
    """Ops never judged light: ``_foreach_*`` and ``_fused_*`` ops, which compute over
    lists of tensors, the views that set a negative or conjugate bit, and ops whose
    result's shape is read from data (:data:`_DATA_SHAPED`)."""
    name = label.removeprefix("aten::")
    return name.startswith(("_foreach_", "_fused_", "_amp_foreach_")) or name in _BIT_VIEWS or name in _DATA_SHAPED


#: Ops that make values from their arguments' sizes and literals alone (a template's
#: shape, never its data): what they make may start a parameter fold.
_FACTORIES = frozenset(
    f"aten::{name}"
    for name in (
        "arange linspace logspace ones zeros full eye scalar_tensor tril_indices triu_indices "
        "ones_like zeros_like full_like new_ones new_zeros new_full"
    ).split()
)


#: Ops whose result's shape is read from data: empty in a trial, full in a timed call, if
#: the data tells them apart (the trials poison what ``torch.empty`` hands out).
_DATA_SHAPED = frozenset(
    "nonzero nonzero_numpy argwhere masked_select unique _unique _unique2 unique_consecutive unique_dim "
    "unique_dim_consecutive bincount repeat_interleave".split()
)


def _follow_lineage(
    operator: Any, args: list[Any], kwargs: dict[str, Any], output: Any, read_keys: list[int], input_free: bool, reached: set[int]
) -> None:
    """Update ``reached`` (the storages an input's data reached) after one op step: what
    it wrote or made from reached data is reached; a storage it made afresh (which may
    reuse a freed one's address) is reached only so. Views, ``set_`` and in-place results
    share their storage, whose state they keep or, written from reached data, take."""
    kept = set(read_keys)
    for tensor in tensor_leaves(output):
        key = _storage_id(tensor)
        if key not in kept:
            reached.discard(key)  # fresh memory
        if not input_free:
            reached.add(key)
    if not input_free:
        for tensor, _ in _written(operator, args, kwargs, output):
            reached.add(_storage_id(tensor))


def _track_writes(
    operator: Any, op: Any, args: list[Any], kwargs: dict[str, Any], output: Any, derived: dict[int, bool], writer: dict[int, str]
) -> None:
    """Whether what one operator wrote comes from the candidate's kernels, and its writer."""
    read = tensor_leaves(args) + tensor_leaves(kwargs)
    for tensor, overwrite in _written(operator, args, kwargs, output):
        key = _storage_id(tensor)
        sources = [t for t in read if _storage_id(t) != key] if overwrite else read
        derived[key] = any(derived.get(_storage_id(t), False) for t in sources) or (not overwrite and derived.get(key, False))
        writer[key] = operator_label(op)


def _value_refs(value: Any) -> list[int]:
    """The numbers of the plan values (``{"t": ["val", n]}``) that ``value`` names."""
    return [number for kind, number in _tensor_refs(value) if kind == "val"]


def release_schedule(plan: dict[str, Any]) -> list[list[int]]:
    """For each step of a plan, the values it used last (or made and nobody uses): a
    replay drops them after that step, so that it holds no more memory than the recorded
    forward did. Values the plan returns are never dropped."""
    last: dict[int, int] = {}
    for index, step in enumerate(plan["steps"]):
        for number in _value_refs([step.get("args"), step.get("kwargs"), step.get("options"), step.get("table"), step.get("entries")]):
            last[number] = index
        for number in _value_refs(step.get("out")):
            last.setdefault(number, index)  # made here: used later, or never
    returned = set(_value_refs(plan.get("outputs")))
    schedule: list[list[int]] = [[] for _ in plan["steps"]]
    for number, index in last.items():
        if number not in returned:
            schedule[index].append(number)
    return schedule


def _storage_id(tensor: Any) -> int:
    try:
        return tensor.untyped_storage().data_ptr() or id(tensor)
    except (RuntimeError, NotImplementedError):
        return id(tensor)


#: Ops that update arguments in place though their schema does not mark them written
#: (``Tensor? running_mean`` without ``(a!)``), with those arguments' names: the batch
#: norms' running statistics (in training), and ``_saturate_weight_to_fp16``, which clamps
#: its ``weight`` to float16's range in place and returns it (red-team round 21's scan of
#: every aten overload for arguments changed without a write annotation).
_UNDECLARED_WRITES = {
    **{
        name: ("running_mean", "running_var")
        for name in (
            "native_batch_norm", "batch_norm", "_batch_norm_impl_index", "batch_norm_update_stats", "cudnn_batch_norm",
            "miopen_batch_norm", "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts",
        )
    },
    "_saturate_weight_to_fp16": ("weight",),
}


def _written(operator: Any, args: list[Any], kwargs: dict[str, Any], output: Any) -> list[tuple[Any, bool]]:
    """The tensors an operator wrote, each with whether it overwrote its whole storage."""
    import torch

    written: list[tuple[Any, bool]] = []
    schema = operator._schema
    is_view = any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
    for index, argument in enumerate(schema.arguments):
        value = _bound(args, kwargs, index, argument.name)
        if argument.alias_info is not None and argument.alias_info.is_write:
            for tensor in tensor_leaves(value):  # a tensor, or each of a list (``_foreach_add_``)
                whole = isinstance(value, torch.Tensor) and tensor.is_contiguous() and tensor.numel() * tensor.element_size() == _storage_state(tensor)[1]
                written.append((tensor, whole and (argument.is_out or schema.name.split("::")[1] in _OVERWRITING)))
    outputs = output if isinstance(output, (tuple, list)) else [output]
    shared = {_storage_id(t) for t in tensor_leaves([args, kwargs])}
    if not is_view:
        # What it made afresh, also beside an argument it writes (``rrelu_with_noise``
        # writes ``noise`` and returns a fresh result); a result on an argument's storage
        # is a view whose schema does not say so (``unsafe_split``), or the argument
        # written, which wrote nothing more.
        fresh = [r.alias_info is None for r in schema.returns]
        written += [
            (t, True)
            for position, t in enumerate(outputs)
            if isinstance(t, torch.Tensor) and _storage_id(t) not in shared and (not written or (position < len(fresh) and fresh[position]))
        ]
    else:
        # A result its schema calls a view of an argument but that lies in memory of its
        # own was made afresh (``_grad_sum_to_size`` sums so: red-team round 25).
        written += [(t, True) for t in outputs if isinstance(t, torch.Tensor) and _storage_id(t) not in shared]
    if not written and schema.name.endswith("_") and not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        # An in-place op by its name whose schema marks nothing written
        # (``_no_grad_embedding_renorm_(Tensor weight, ...) -> Tensor`` scales rows of
        # ``weight``; red-team round 22): its first tensor argument counts as written.
        leaves = (tensor_leaves(_bound(args, kwargs, i, a.name)) for i, a in enumerate(schema.arguments))
        written += [(tensor, False) for tensor in next((found for found in leaves if found), [])]
    if schema.name.split("::")[1] in _UNDECLARED_WRITES:
        # Batch norm's running statistics (in training) and the like, updated in place though
        # the schema does not say so: what the step wrote there is pinned, followed and
        # checked too.
        names = [a.name for a in schema.arguments]
        training = next((bool(_bound(args, kwargs, i, n)) for i, n in enumerate(names) if n in ("training", "train")), True)
        for name in _UNDECLARED_WRITES[schema.name.split("::")[1]] if training else ():
            written += [(tensor, False) for tensor in tensor_leaves(_bound(args, kwargs, names.index(name), name))]
    return written


def _shape_of(value: Any) -> Any:
    """A plan value without the numbering of constants (they may be recorded anew)."""
    if isinstance(value, list):
        return [_shape_of(v) for v in value]
    if isinstance(value, dict):
        if "t" in value and isinstance(value["t"], list) and value["t"][:1] == ["const"]:
            return {"t": "const"}
        return {k: _shape_of(v) for k, v in value.items()}
    return value


def _step_summary(step: Any) -> str:
    if not isinstance(step, dict):
        return "?"
    if step.get("kind") == "addresses":
        return "wrote addresses into a table"
    if step.get("kind") == "kernel":
        return f"launched {step.get('kernel', {}).get('name', '?') if isinstance(step.get('kernel'), dict) else '?'}{step.get('grid')}"
    op = step.get("op")
    return f"called aten::{op[1]}" if isinstance(op, list) and len(op) == 3 else "called an operator"


def plan_drift(first: Any, second: Any) -> str:
    """How two recordings of the same call differ ("" when they do the same work: the
    same operations and launches on the same arguments; constants may differ)."""
    if not isinstance(first, dict) or not isinstance(second, dict):
        return "a recording is malformed"
    a, b = first.get("steps"), second.get("steps")
    if not isinstance(a, list) or not isinstance(b, list):
        return "a recording is malformed"
    for index, (x, y) in enumerate(zip(a, b)):
        if _shape_of(x) != _shape_of(y):
            if _step_summary(x) == _step_summary(y):  # the same op on other arguments (a value read back)
                return f"step {index + 1} {_step_summary(x)} with other arguments in a later call than in one before"
            return f"step {index + 1} {_step_summary(x)} in one call and {_step_summary(y)} in a later one"
    if len(a) != len(b):
        longer, which = (a, "an earlier") if len(a) > len(b) else (b, "a later")
        return f"{which} call also {_step_summary(longer[min(len(a), len(b))])} ({len(a)} steps, then {len(b)})"
    if _shape_of(first.get("outputs")) != _shape_of(second.get("outputs")):
        return "it returned other values"
    return ""


def plan_compute_ops(plan: Any) -> set[str]:
    """The computing aten operators a plan calls (for comparing recordings)."""
    steps = plan.get("steps") if isinstance(plan, dict) else None
    found = set()
    for step in steps if isinstance(steps, list) else []:
        op = step.get("op") if isinstance(step, dict) else None
        if isinstance(op, list) and len(op) == 3 and isinstance(op[1], str):
            label = f"aten::{op[1]}"
            if label not in NON_COMPUTE_OPS:
                found.add(label)
    return found


def plan_signature(inputs: Sequence[Any]) -> str:
    """A key for the inputs a plan was recorded for: shapes, strides, dtypes and values."""
    import torch

    parts = []
    for value in inputs:
        if isinstance(value, torch.Tensor):
            parts.append(f"T{str(value.dtype).removeprefix('torch.')}{tuple(value.shape)}{tuple(value.stride())}")
        elif isinstance(value, float) and math.isnan(value):
            parts.append("nan")
        else:
            parts.append(repr(value))
    return "|".join(parts)
