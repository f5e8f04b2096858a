"""Triton's host-side wrappers of a tensor as kernel-launch arguments in plans:
``triton.reinterpret(x, dtype)`` (a ``TensorWrapper``) and a host TMA
``TensorDescriptor``. Written against the version before, where a forward passing either
to a kernel was ``not_replayable`` ("... which a plan cannot describe")."""

from __future__ import annotations

import copy

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.runtime.jit import TensorWrapper  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from kz_core.evaluate.plans import PlanError, Replay, validate_plan  # noqa: E402
from kz_core.evaluate.recording import PLAN_VERSION, NotReplayable, Recorder, record_kernel  # noqa: E402


def _record(forward, *inputs):
    recorder = Recorder(list(inputs), 1 << 20)
    plan = recorder.plan(recorder.call(forward, list(inputs)))
    return plan, recorder.constants


def _forward(x):
    out = torch.empty_like(x)
    wrapped = triton.reinterpret(x, tl.int32)
    descriptor = TensorDescriptor.from_tensor(out, [16])
    with record_kernel("triton", {"name": "k"}, (1,), [wrapped, descriptor, x.numel()], {"other": triton.reinterpret(out, tl.int32)}):
        out.copy_(x.abs())
    return out


def test_a_forward_passing_reinterpret_and_a_descriptor_is_recorded_and_replayed():
    x = torch.randn(64)
    plan, constants = _record(_forward, x)
    step = next(s for s in plan["steps"] if s["kind"] == "kernel")
    assert step["args"][0] == {"tl_reinterpret": [{"t": ["in", 0]}, {"tl_dtype": "int32"}]}
    descriptor = step["args"][1]["tl_descriptor"]
    assert descriptor == {"base": descriptor["base"], "shape": [64], "strides": [1], "block_shape": [16], "padding": "zero", "round_f32_to_tf32": False}
    assert "tl_reinterpret" in step["options"]["other"]
    validate_plan(copy.deepcopy(plan), "triton", len(constants))

    seen = []

    def launch(step, args, options):
        seen.append((args, options))
        wrapped, desc = args[0], args[1]
        desc.base.copy_(wrapped.base.abs())

    fresh = torch.randn(64)
    provenance: dict = {}
    result = Replay(plan, constants, launch, "cpu", reinterpreting=False)(fresh, provenance=provenance)
    torch.testing.assert_close(result, fresh.abs())
    (args, options), = seen
    assert type(args[0]) is TensorWrapper and args[0].base is fresh and args[0].dtype == tl.int32
    assert type(args[1]) is TensorDescriptor and args[1].block_shape == [16] and list(args[1].shape) == [64]
    assert type(options["other"]) is TensorWrapper and options["other"].base is args[1].base
    assert provenance["kernel_derived"] == [True]  # the descriptor's base counts as given to the kernel


def test_wrappers_are_not_plan_values_outside_kernel_launches():
    x = torch.randn(4)
    recorder = Recorder([x], 1 << 20)
    with pytest.raises(NotReplayable, match="cannot describe"):
        recorder.encode(triton.reinterpret(x, tl.int32))
    plan, constants = _record(_forward, torch.randn(64))
    index = next(i for i, s in enumerate(plan["steps"]) if s["kind"] == "kernel")
    wrapped = plan["steps"][index]["args"][0]
    op = {"kind": "op", "op": ["aten", "abs", "default"], "args": [wrapped], "kwargs": {}, "out": {"t": ["val", 99]}}
    bad = copy.deepcopy(plan)
    bad["steps"].insert(index, op)
    with pytest.raises(PlanError, match="unknown or malformed tag"):
        validate_plan(bad, "triton", len(constants))


def _descriptor_plan(descriptor: dict) -> dict:
    kernel = {"kind": "kernel", "backend": "triton", "kernel": {"name": "k"}, "grid": [1], "args": [{"tl_descriptor": descriptor}], "options": {}}
    return {"version": PLAN_VERSION, "inputs": [{"kind": "tensor", "dtype": "float32", "shape": [64], "stride": [1]}], "steps": [kernel], "outputs": {"t": ["in", 0]}, "constants": 0}


_GOOD = {"base": {"t": ["in", 0]}, "shape": [64], "strides": [1], "block_shape": [16], "padding": "zero", "round_f32_to_tf32": False}


@pytest.mark.parametrize(
    "change",
    [
        {"block_shape": [12]},
        {"block_shape": [0]},
        {"shape": [64, 2]},
        {"shape": []},
        {"shape": [True]},
        {"strides": [-1]},
        {"strides": [1.0]},
        {"padding": "junk"},
        {"round_f32_to_tf32": 1},
        {"base": 5},
        {"base": {"tuple": []}},
        {"base": {"t": ["in", 3]}},
        {"extra": 1},
    ],
)
def test_malformed_descriptors_are_refused(change):
    validate_plan(_descriptor_plan(dict(_GOOD)), "triton", 0)
    with pytest.raises(PlanError):
        validate_plan(_descriptor_plan({**_GOOD, **change}), "triton", 0)


def test_a_descriptor_beyond_its_base_storage_is_refused_at_replay():
    plan = validate_plan(_descriptor_plan({**_GOOD, "shape": [128]}), "triton", 0)
    with pytest.raises(PlanError, match="outside its base"):
        Replay(plan, [], lambda step, args, options: None, "cpu")(torch.randn(64))


@pytest.mark.parametrize("content", [[{"t": ["in", 0]}], [{"t": ["in", 0]}, "int32"], [5, {"tl_dtype": "int32"}], [{"t": ["in", 0]}, {"py": 1}]])
def test_malformed_reinterprets_are_refused(content):
    plan = _descriptor_plan(dict(_GOOD))
    plan["steps"][0]["args"] = [{"tl_reinterpret": content}]
    with pytest.raises(PlanError):
        validate_plan(plan, "triton", 0)


def test_reinterpreting_to_another_dtype_views_the_bytes():
    """A kernel given ``triton.reinterpret(buffer, tl.uint8)`` of an int8 buffer reads its
    bytes as another dtype: a sign-extending conversion of it afterwards computes (as after
    any kernel that bitcasts); with the buffer's own dtype it does not."""

    def plan_for(dtype: str) -> dict:
        steps = [
            {"kind": "op", "op": ["aten", "empty", "memory_format"], "args": [[8]], "kwargs": {"dtype": {"dtype": "int8"}}, "out": {"t": ["val", 0]}},
            {"kind": "kernel", "backend": "fake", "kernel": {"name": "k"}, "grid": [1], "args": [{"tl_reinterpret": [{"t": ["val", 0]}, {"tl_dtype": dtype}]}, {"t": ["in", 0]}], "options": {}},
            {"kind": "op", "op": ["aten", "_to_copy", "default"], "args": [{"t": ["val", 0]}], "kwargs": {"dtype": {"dtype": "int16"}}, "out": {"t": ["val", 1]}},
        ]
        plan = {"version": PLAN_VERSION, "inputs": [{"kind": "tensor", "dtype": "float32", "shape": [8], "stride": [1]}], "steps": steps, "outputs": {"t": ["val", 1]}, "constants": 0}
        return validate_plan(plan, "fake", 0)

    def launch(step, args, options):
        args[0].base.copy_(torch.where(args[1] > 0, 1, -1).to(torch.int8))

    compute = {}
    for dtype in ("uint8", "int8"):
        replay = Replay(plan_for(dtype), [], launch, "cpu", reinterpreting=False)
        replay(torch.randn(8), provenance={})
        compute[dtype] = replay.compute_ops
    assert compute["int8"] == []
    assert compute["uint8"] != []


def test_check_arguments_accepts_wrappers_where_a_pointer_goes_only():
    from kz_backend_triton.kernels import KernelArgumentError, check_arguments

    @triton.jit
    def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pass

    x = torch.randn(64)
    wrapped = triton.reinterpret(x, tl.int32)
    descriptor = TensorDescriptor.from_tensor(x, [16])
    check_arguments("kernel", kernel, [wrapped, descriptor, 64], {"BLOCK": 16})
    check_arguments("kernel", kernel, [(wrapped, x), descriptor, 64], {"BLOCK": 16})
    for args, options in (([x, x, 64, wrapped], {}), ([x, x, 64], {"BLOCK": descriptor}), ([x, [descriptor], 64], {"BLOCK": 16})):
        with pytest.raises(KernelArgumentError):
            check_arguments("kernel", kernel, args, options)


@triton.jit
def _activation(x):
    return tl.maximum(x, 0.0)


def _forward_with_function(x):
    out = torch.empty_like(x)
    with record_kernel("triton", {"name": "k"}, (1,), [x, out], {"FN": _activation, "BLOCK": 64}):
        out.copy_(x.relu())
    return out


def test_a_jit_function_given_as_a_constexpr_is_named_and_resolved_by_the_backend():
    """Over-rejection probe 18: a generic kernel launched with ``FN=relu`` (a ``@triton.jit``
    function as a constexpr, as libraries build pointwise ops from one template) was
    ``not_replayable`` ("a value of type ...JITFunction, which a plan cannot describe")."""
    from kz_backend_triton.kernels import ForeignKernel, TritonKernels

    from kz_core.evaluate.plans import KernelRef

    plan, constants = _record(_forward_with_function, torch.randn(64))
    step = next(s for s in plan["steps"] if s["kind"] == "kernel")
    assert step["options"]["FN"] == {"tl_jit": "_activation"}
    validate_plan(copy.deepcopy(plan), "triton", len(constants))
    seen = []
    Replay(plan, constants, lambda step, args, options: seen.append(options["FN"]), "cpu", reinterpreting=False)(torch.randn(64))
    assert seen == [KernelRef("_activation")]
    kernels = TritonKernels({"_activation": _activation})
    assert kernels._resolved({"FN": KernelRef("_activation"), "other": [KernelRef("_activation"), 3]}) == {"FN": _activation, "other": [_activation, 3]}
    with pytest.raises(ForeignKernel, match="does not define"):
        kernels._resolved((KernelRef("elsewhere"),))


@pytest.mark.parametrize("content", ["", "a..b", "__import__", "a.__class__", 5, ["k"], "x" * 2000])
def test_malformed_jit_names_are_refused(content):
    plan = _descriptor_plan(dict(_GOOD))
    plan["steps"][0]["options"] = {"FN": {"tl_jit": content}}
    if content in ("__import__", "a.__class__"):  # names as good as any: looked up among the source's kernels only
        validate_plan(plan, "triton", 0)
        return
    with pytest.raises(PlanError):
        validate_plan(plan, "triton", 0)


def test_a_jit_function_is_no_operator_argument():
    plan = _descriptor_plan(dict(_GOOD))
    plan["steps"].insert(0, {"kind": "op", "op": ["aten", "abs", "default"], "args": [{"tl_jit": "k"}], "kwargs": {}, "out": {"t": ["val", 0]}})
    with pytest.raises(PlanError, match="unknown or malformed tag"):
        validate_plan(plan, "triton", 0)
