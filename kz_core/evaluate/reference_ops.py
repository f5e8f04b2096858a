"""Requests a *reference* worker serves: reference outputs, baselines, audits, the
measurements that validate a proposed module, and the on-device comparison of a
candidate's GPU outputs (shared through CUDA IPC).

Candidate code never runs in a reference worker: it only runs problems' reference modules
(and proposed modules, in pools of their own), and reads candidates' outputs as data.
Mixed into ``kz_core.evaluate.worker.Worker``.
"""

from __future__ import annotations

import time
from typing import Any

from kz_core.evaluate.execution import error_reply, is_fatal_cuda_error, output_meta



#: Characters of a non-tensor input's ``repr`` a reference trial reports.
VALUE_TEXT = 120


def _value_text(value: Any) -> str:
    """A non-tensor input's ``repr``, shortened, without the address an object's default
    ``repr`` shows (a new object per seed is the same value)."""
    import re

    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))[:VALUE_TEXT]

class ReferenceOps:
    """The reference role's requests (state lives in ``Worker``)."""

    def op_reference(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.evaluate.execution import (
            fingerprint,
            flatten_outputs,
            make_inputs,
            synchronize,
        )
        from kz_core.evaluate.timing import Laps

        started = time.perf_counter()
        laps = Laps()
        try:
            module = self.problem_module(request["problem"])
            key = (request["problem"]["hash"], request["init_seed"])
            if key not in self.references:
                self.references.clear()  # one reference model at a time: they can be large
                self.references[key] = self.build(module.Model, module, request["problem"], request["init_seed"])
            model = self.references[key]
        except BaseException as exc:  # noqa: BLE001 - a broken problem is a reply
            return error_reply("problem", exc)
        trials = []
        laps("instantiate")
        try:
            for seed in request["seeds"]:
                inputs = make_inputs(module, seed, self.device)
                synchronize(self.device)
                laps("draw inputs")
                prints = fingerprint(inputs)
                laps("fingerprint inputs")
                output = model(*inputs)
                synchronize(self.device)
                laps("reference calls")
                structure, leaves = flatten_outputs(output)
                if not trials:
                    default_shapes = _shapes(inputs, leaves)
                trials.append(self._trial_record(seed, structure, leaves, inputs, prints, request))
                inputs = output = leaves = None  # freed before the next seed's are drawn
                laps("outputs to the host")
        except BaseException as exc:  # noqa: BLE001
            return error_reply("reference", exc)
        variant = None
        cuda_error = False
        for overrides in request.get("variations", []):
            try:
                varied = self.varied_module(request["problem"], overrides)
                varied_model = self.build(varied.Model, varied, request["problem"], request["init_seed"])
                inputs = make_inputs(varied, request["variant_seed"], self.device)
                prints = fingerprint(inputs)
                structure, leaves = flatten_outputs(varied_model(*inputs))
                synchronize(self.device)
                if trials and _shapes(inputs, leaves) == default_shapes:
                    continue  # nothing the inputs are made of was rebound (sizes written inline)
            except BaseException as exc:  # noqa: BLE001 - this rebinding does not suit the problem
                # Rebound sizes can break a problem's own assumptions (class indices beyond
                # a size that was not rebound): on a GPU that is a device-side assert, which
                # leaves this process's CUDA context unusable. The trials are already on the
                # host; reply with them, no variation, and let the parent replace this worker.
                if is_fatal_cuda_error(exc):
                    cuda_error = True
                    break
                continue
            variant = {"overrides": overrides, "trial": self._trial_record(request["variant_seed"], structure, leaves, inputs, prints, request)}
            break
        laps("size variation")
        return {"ok": True, "trials": trials, "variant": variant, "seconds": time.perf_counter() - started, "cuda_error": cuda_error, "phases": laps.phases}

    def op_footprint(self, request: dict[str, Any]) -> dict[str, Any]:
        """The bytes of one call's inputs and outputs, found on torch's ``meta`` device (no
        memory, no data): what the evaluator reserves of the GPU's memory before it asks
        for the reference itself. ``bytes`` is None when the problem cannot run there (a
        ``get_inputs`` that needs data, a forward that reads values)."""
        from kz_core.evaluate.execution import flatten_outputs, make_init_inputs

        torch = self.torch
        try:
            module = self.problem_module(request["problem"])
            init_inputs = make_init_inputs(module, request["init_seed"])
            with torch.device("meta"):
                inputs = list(module.get_inputs())
                model = module.Model(*init_inputs)
                _, leaves = flatten_outputs(model(*inputs))
            tensors = [x for x in inputs + leaves if isinstance(x, torch.Tensor)]
            if not tensors or any(x.device.type != "meta" for x in tensors):
                return {"ok": True, "bytes": None}
            return {"ok": True, "bytes": int(sum(x.nbytes for x in tensors))}
        except BaseException:  # noqa: BLE001 - not on the meta device: the caller reserves a fixed share
            return {"ok": True, "bytes": None}
        finally:
            from kz_core.evaluate.execution import restore_flags

            restore_flags(self.baseline_flags)

    def _trial_record(self, seed: int, structure: Any, leaves: list[Any], inputs: list[Any], prints: Any, request: dict[str, Any]) -> dict[str, Any]:
        """One reference trial's reply: its outputs, or only their description when they
        are larger than ``request["max_transfer_bytes"]`` (they are compared on the device)."""
        on_device = sum(x.nbytes for x in leaves if isinstance(x, self.torch.Tensor)) > request.get("max_transfer_bytes", 1 << 62)
        return {
            "seed": seed,
            "structure": structure,
            # On the host already: a later request that kills the CUDA context (a size
            # variation) cannot lose them.
            "outputs": [None if on_device else (x.cpu() if isinstance(x, self.torch.Tensor) else x) for x in leaves],
            "output_meta": [output_meta(x) for x in leaves],
            "on_device": on_device,
            "output_devices": [str(x.device) if isinstance(x, self.torch.Tensor) else "" for x in leaves],
            "input_fingerprints": prints,
            "input_bytes": sum(x.nbytes for x in inputs if isinstance(x, self.torch.Tensor)),
            # What each non-tensor input is (``repr``, shortened), so that the parent can
            # tell a problem whose non-tensor inputs change with the seed.
            "value_inputs": [None if isinstance(x, self.torch.Tensor) else _value_text(x) for x in inputs],
        }

    def op_compare(self, request: dict[str, Any]) -> dict[str, Any]:
        """Compare a candidate's GPU outputs, shared through CUDA IPC, with the reference's.

        For outputs too large to send to the parent. The reference is recomputed here for
        the seed; the candidate's tensors are cloned out of its memory before comparing,
        unless the parent says the sender is an executor (``copy: false``), whose memory
        nothing changes while it waits.
        """
        import json as _json

        from kz_core.evaluate.correctness import compare_outputs
        from kz_core.evaluate.execution import (
            flatten_outputs,
            make_inputs,
            open_shared_cuda_tensor,
            synchronize,
        )
        from kz_core.evaluate.timing import Laps
        from kz_core.model import Finding, Problem
        from kz_core.serialization import to_json_dict

        if self.role != "reference":
            return {"ok": False, "stage": "protocol", "message": "only reference workers compare outputs"}
        problem = request["problem"]
        overrides = request.get("overrides") or {}
        laps = Laps()
        try:
            key = (problem["hash"], request["init_seed"], _json.dumps(overrides, sort_keys=True))
            if key not in self.compare_models:
                module = self.varied_module(problem, overrides) if overrides else self.problem_module(problem)
                self.compare_models.clear()  # one reference model at a time
                self.compare_models[key] = (module, self.build(module.Model, module, problem, request["init_seed"]))
            module, model = self.compare_models[key]
            laps("instantiate")
            inputs = make_inputs(module, request["seed"], self.device)
            synchronize(self.device)
            laps("draw inputs")
            _, expected = flatten_outputs(model(*inputs))
            del inputs
            synchronize(self.device)
            laps("reference call")
        except BaseException as exc:  # noqa: BLE001
            return error_reply("reference", exc)
        actual: list[Any] = []
        findings: list[Finding] = []
        shared = request["shared"]
        if len(shared) != len(expected):
            findings.append(Finding("output_type", f"{request['label']}: {len(shared)} outputs shared, the reference returns {len(expected)}"))
        for index, description in enumerate(shared):
            if description is None:
                # Only what has nothing to share may go unshared: an output a reference
                # returns as a tensor with elements is compared, never skipped.
                want = expected[index] if index < len(expected) else None
                if isinstance(want, self.torch.Tensor) and want.numel():
                    findings.append(Finding("output_type", f"{request['label']}, output {index}: not shared, where the reference returns a tensor"))
                actual.append(None)
                continue
            try:
                actual.append(open_shared_cuda_tensor(description, copy=request.get("copy", True) is not False))
            except Exception as exc:  # noqa: BLE001 - a forged or stale description
                findings.append(Finding("output_type", f"{request['label']}, output {index}: could not be read from the candidate's process ({exc})"))
                actual.append(None)
        laps("open shared outputs")
        pairs = [(want, got) for want, got in zip(expected, actual) if got is not None]
        compared, max_abs, max_rel = compare_outputs(
            Problem(problem["name"], problem["code"]),
            [w for w, _ in pairs],
            [g for _, g in pairs],
            pm=self.pm,
            table=request["tolerance"],
            atol=request["atol"],
            rtol=request["rtol"],
            label=request["label"],
        )
        del actual, expected, pairs
        laps("compare")
        return {"ok": True, "findings": [to_json_dict(f) for f in findings + compared], "max_abs_error": max_abs, "max_rel_error": max_rel, "phases": laps.phases}

    def release_cached_memory(self) -> None:
        """Hand the GPU memory torch's allocator keeps cached back to the device, after each
        request of a reference worker or an executor: other workers on the same GPU need it
        (a reference of 17 GB would otherwise stay cached in this process), and the
        evaluator's memory budget (``kz_core.evaluate.memory``) counts only what is in use."""
        if self.device.startswith("cuda"):
            self.torch.cuda.empty_cache()

    def op_fuzz_reference(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reference's outputs for one fuzz example (an error: the example does not
        suit the problem, and the fuzzer discards it)."""
        from kz_core.evaluate.execution import fingerprint, flatten_outputs, fuzz_inputs, synchronize

        example = request["example"]
        try:
            module = self.varied_module(request["problem"], example["overrides"]) if example["overrides"] else self.problem_module(request["problem"])
            model = self.build(module.Model, module, request["problem"], request["init_seed"])
            inputs = fuzz_inputs(module, example, self.device)
            prints = fingerprint(inputs)
            structure, leaves = flatten_outputs(model(*inputs))
            synchronize(self.device)
        except BaseException as exc:  # noqa: BLE001 - this example does not suit the problem
            return error_reply("reference", exc)
        # Fuzz examples are small: their outputs always travel (no transfer limit).
        return {"ok": True, "trial": self._trial_record(example["seed"], structure, leaves, inputs, prints, {})}

    def op_audit(self, request: dict[str, Any]) -> dict[str, Any]:
        """Reference outputs for an audit: two seeds, the first again, and with TF32 on."""
        try:
            runs = self.audit_runs(request)
        except BaseException as exc:  # noqa: BLE001 - a broken problem is a finding
            return error_reply("reference", exc)
        return {"ok": True, "runs": runs}

    def audit_runs(self, request: dict[str, Any]) -> dict[str, Any]:
        """The audit's runs (``first``, ``second``, ``again``, and ``tf32`` on a GPU), each
        with a freshly built model; ``again`` reseeds after making the inputs, so that random
        ops in forward draw other numbers than in ``first``. Exceptions propagate."""
        from kz_core.evaluate.execution import (
            flatten_outputs,
            global_flags,
            make_inputs,
            restore_flags,
            seed_everything,
            set_tf32,
            synchronize,
        )

        first, second = request["seeds"]
        flags = global_flags()

        def run(seed: int, tf32: bool | None = None, reseed: bool = False) -> dict[str, Any]:
            module = self.problem_module(request["problem"])
            model = self.build(module.Model, module, request["problem"], request["init_seed"])
            inputs = make_inputs(module, seed, self.device)
            if reseed:  # random ops in forward now draw other numbers than the first run's
                seed_everything(seed ^ 0x5DEECE66D)
            if tf32 is not None:
                set_tf32(tf32)
            try:
                structure, leaves = flatten_outputs(model(*inputs))
                synchronize(self.device)
            finally:
                restore_flags(flags)
            return {"structure": structure, "outputs": [x if type(x) is self.torch.Tensor else None for x in leaves]}

        runs = {"first": run(first), "second": run(second), "again": run(first, reseed=True)}
        if self.device.startswith("cuda"):
            runs["tf32"] = run(first, tf32=True)
        return runs

    def op_validate(self, request: dict[str, Any]) -> dict[str, Any]:
        """Measurements for validating a proposed module (``kz_core/proposer/validate.py``).

        One forward on the first seed gives the input and output bytes; beyond
        ``max_bytes`` the reply stops there (no outputs are sent). Otherwise: the audit's
        runs, the aten op names of one profiled forward, and the median of a few timed
        forward calls (``timing_trials``; skipped when the first call alone took longer
        than ``skip_timing_ms``). The module is loaded with the problem's loader; a module
        that raises is an error reply with stage ``problem`` (import) or ``reference``.
        """
        from kz_core.evaluate.execution import (
            flatten_outputs,
            make_inputs,
            profiled,
            restore_flags,
            synchronize,
        )
        from kz_core.evaluate.timing import TimingSettings, time_calls

        try:
            module = self.problem_module(request["problem"])
        except BaseException as exc:  # noqa: BLE001 - a module that cannot load is a reply
            return error_reply("problem", exc)
        try:
            model = self.build(module.Model, module, request["problem"], request["init_seed"])
            inputs = make_inputs(module, request["seeds"][0], self.device)
            started = time.perf_counter()
            _, leaves = flatten_outputs(model(*inputs))
            synchronize(self.device)
            first_call_ms = (time.perf_counter() - started) * 1e3
            tensor = self.torch.Tensor
            input_bytes = sum(x.nbytes for x in inputs if isinstance(x, tensor))
            output_bytes = sum(x.nbytes for x in leaves if isinstance(x, tensor))
            sizes = {"input_bytes": input_bytes, "output_bytes": output_bytes, "first_call_ms": first_call_ms}
            if input_bytes + output_bytes > request["max_bytes"]:
                return {"ok": True, **sizes, "runs": None, "op_names": [], "runtime": None}
            del leaves
            runs = self.audit_runs(request)
            with profiled(self.device, self.scratch_root / "validate-trace.json") as profile:
                model(*inputs)
                synchronize(self.device)
            op_names = list(dict.fromkeys(profile.op_names))
            runtime = None
            if first_call_ms <= request["skip_timing_ms"]:
                trials = int(request["timing_trials"])
                settings = TimingSettings(warmup_ms=0.0, min_trials=trials, max_trials=trials, budget_ms=0.0)
                runtime = time_calls(lambda _: model(*inputs), self.device, settings)
        except BaseException as exc:  # noqa: BLE001 - a module that raises is a finding
            return error_reply("reference", exc)
        finally:
            restore_flags(self.baseline_flags)  # whatever the module changed, for the next one
        return {"ok": True, **sizes, "runs": runs, "op_names": op_names, "runtime": runtime}

    def op_compile_baseline(self, request: dict[str, Any]) -> dict[str, Any]:
        """Compile the problem's ``compile`` baseline ahead of its timing: ``torch.compile``
        of its ``Model``, called once on the inputs of ``request["seed"]``. The model is
        dropped, but dynamo keeps what it compiled for ``Model.forward`` until the
        baseline's timing (``op_baseline``), whose own model of the same class then
        compiles nothing: the evaluator sends this with the GPU held shared, so that
        inductor's compiling (seconds to a minute) is not done in the timing's exclusive
        hold, where every other candidate waits for it."""
        from kz_core.evaluate.execution import make_inputs, synchronize

        started = time.perf_counter()
        hits = _graph_cache_hits()
        try:
            module = self.problem_module(request["problem"])
            model = self.torch.compile(self.build(module.Model, module, request["problem"], request["init_seed"]))
            model(*make_inputs(module, request["seed"], self.device))
            synchronize(self.device)
        except BaseException as exc:  # noqa: BLE001 - the timing compiles it again, and says why it fails
            self.torch._dynamo.reset()
            return error_reply("baseline", exc)
        return {"ok": True, "seconds": time.perf_counter() - started, "graph_cache_hits": _graph_cache_hits() - hits}

    def op_compile_baseline_fake(self, request: dict[str, Any]) -> dict[str, Any]:
        """``op_compile_baseline``'s request on fake tensors: the same ``torch.compile`` of the problem's
        ``Model`` and first call, made under torch's ``FakeTensorMode`` (tensors with shapes
        and no memory: no kernel runs, no GPU memory is taken) through a backend that has
        inductor compile the graph as ``torch.compile`` would, then runs the graph itself on
        the fake tensors instead of the compiled code. What is kept is on disk: inductor's
        graph cache and Triton's kernels, in this worker's cache folders, so that the real
        first call (``op_compile_baseline``, with the GPU held shared) loads them
        instead of compiling. Dynamo's own compiled code for the fake tensors is dropped
        (``torch._dynamo.reset``): the real call traces the model again.

        The evaluator sends this with no GPU lock held. The problem's own code that runs
        here (building the model, drawing the inputs: its forward is only traced) should
        make no real tensor: the reply gives the GPU memory bytes allocated meanwhile
        (``problem_allocated_bytes``; the evaluator's log names a problem with a MiB or
        more, one whose code left the fake mode), and the allocations and bytes of the
        whole request (``allocations``, ``allocated_bytes``): torch makes a few small ones
        of its own (on an H100, 49 allocations for every problem, one of them while the
        model was built, and 48 small copies, no kernel, while compiling)."""
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode

        from kz_core.evaluate.execution import make_init_inputs, make_inputs, restore_flags, seed_everything

        started = time.perf_counter()
        before = _gpu_allocations(self.device)
        problem_bytes = 0
        try:
            module = self.problem_module(request["problem"])
            with FakeTensorMode():
                made = _gpu_allocations(self.device)
                init_inputs = make_init_inputs(module, request["init_seed"])
                seed_everything(request["init_seed"])
                # Built with the device as torch's default: a fake parameter cannot be
                # moved by Module.to (it cannot be swapped in place).
                with torch.device(self.device):
                    model = module.Model(*init_inputs)
                if isinstance(model, torch.nn.Module):
                    model = model.eval()
                inputs = make_inputs(module, request["seed"], self.device)
                problem_bytes = _gpu_allocations(self.device)[1] - made[1]
                torch.compile(model, backend=_compile_only_backend())(*inputs)
        except BaseException as exc:  # noqa: BLE001 - the real first call compiles it, and says why it fails
            return error_reply("baseline", exc)
        finally:
            self.torch._dynamo.reset()
            restore_flags(self.baseline_flags)
        after = _gpu_allocations(self.device)
        return {
            "ok": True,
            "seconds": time.perf_counter() - started,
            "problem_allocated_bytes": problem_bytes,
            "allocations": after[0] - before[0],
            "allocated_bytes": after[1] - before[1],
        }

    def op_baseline(self, request: dict[str, Any]) -> dict[str, Any]:
        compiled = _graphs_compiled() if request["mode"] == "compile" else 0
        try:
            module = self.problem_module(request["problem"])
            model = self.build(module.Model, module, request["problem"], request["init_seed"])
            if request["mode"] == "compile":
                model = self.torch.compile(model)
            timed = self.time_forward(model, module, request)
        except BaseException as exc:  # noqa: BLE001
            return error_reply("baseline", exc)
        finally:
            if request["mode"] == "compile":
                compiled = _graphs_compiled() - compiled
                self.torch._dynamo.reset()
        reply = {"ok": True, "stats": timed.stats, "retire": timed.dirty, "phases": timed.phases}
        if request["mode"] == "compile":
            reply["graphs_compiled"] = compiled  # 0 after op_compile_baseline
        return reply

    # -- candidate role -----------------------------------------------------------------


def _gpu_allocations(device: str) -> tuple[int, int]:
    """``(allocations, bytes)`` torch's caching allocator made so far in this process on the
    GPU (zeros on a CPU, or before CUDA is initialised)."""
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_initialized():
        return 0, 0
    stats = torch.cuda.memory_stats(device)
    return int(stats.get("allocation.all.allocated", 0)), int(stats.get("allocated_bytes.all.allocated", 0))


def _compile_only_backend() -> Any:
    """``torch.compile``'s own inductor backend with its default options (the same name to
    dynamo), that compiles the graph and then answers with the graph itself: called on
    fake tensors, it runs none of the compiled code."""
    import torch

    class CompileOnly(torch._TorchCompileInductorWrapper):  # type: ignore[misc,name-defined]
        def __call__(self, model_: Any, inputs_: Any) -> Any:
            super().__call__(model_, inputs_)
            return model_

    return CompileOnly(None, None, None)  # mode, options, dynamic: torch.compile's defaults


def _graph_cache_hits() -> int:
    """Graphs inductor found in its graph cache in this process (compiled before, by
    ``op_compile_baseline_fake``, or another process of the same cache folder)."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["fxgraph_cache_hit"])


def _graphs_compiled() -> int:
    """Graphs dynamo has compiled in this process (its ``unique_graphs`` counter)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _shapes(inputs: list[Any], leaves: list[Any]) -> list[Any]:
    """The shapes of a call's tensor inputs and outputs, and its other inputs' values."""
    return [tuple(x.shape) if hasattr(x, "shape") else repr(x)[:200] for x in [*inputs, *leaves]]
