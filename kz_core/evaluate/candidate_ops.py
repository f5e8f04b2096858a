"""Requests a *candidate* worker serves: load (compile) a candidate, run its correctness
trials with every runtime check, time it, and drop it again.

Model-written code runs here, inside the sandboxed worker process; nothing here judges
it: replies carry measurements for the parent. Mixed into ``kz_core.evaluate.worker.Worker``.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kz_core.evaluate.execution import error_reply, set_cpu_budget
from kz_core.paths import remove_tree
from kz_core.plugins import backend_hook


def gap_calls(call: Any, count: int, budget_s: float = 0.0) -> int:
    """``call()`` up to ``count`` times, and no more once ``budget_s`` (0: none) have
    passed since the first: the calls between a recording and the next. How many it made.

    The number is secret and random, so that a forward cannot know which call is recorded
    again; the budget keeps a slow problem's from taking seconds of the GPU (on an H200,
    level 1's gap calls took 78 s of its recordings, up to 11 s for one candidate, all
    with the GPU shared: a problem of 0.4 s a call made up to 31 of them)."""
    started = time.perf_counter()
    made = 0
    for _ in range(count):
        if budget_s and made and time.perf_counter() - started >= budget_s:
            break
        call()
        made += 1
    return made


class CandidateOps:
    """The candidate role's requests (state lives in ``Worker``)."""

    def op_load(self, request: dict[str, Any]) -> dict[str, Any]:
        """Load a candidate; the reply lists the builds it deferred to kz's trusted builder
        (``kz_core.evaluate.builds``), if any, whether or not it loaded."""
        from kz_core.evaluate import builds

        builds.DEFERRED.clear()
        reply = self._load_candidate(request)
        if builds.DEFERRED:
            reply["deferred_builds"] = list(builds.DEFERRED)
        return reply

    def op_build(self, request: dict[str, Any]) -> dict[str, Any]:
        """kz's trusted builder (a fresh candidate worker that loaded no candidate): the
        toolchain's identity (``identity``), or one build of a backend into ``build`` in
        this worker's scratch folder, which the evaluator then moves into the shared folder."""
        import importlib

        from kz_core.plugins import backends

        if self.candidate is not None or self.counter:
            return {"ok": False, "stage": "protocol", "message": "a builder never loaded a candidate"}
        info = backends().get(request.get("backend", ""))
        if info is None or not info.builder or not info.build_identity:
            return {"ok": False, "stage": "protocol", "message": f"backend {request.get('backend')!r} has no builder"}

        def named(spec: str) -> Any:
            module, _, function = spec.partition(":")
            return getattr(importlib.import_module(module), function)

        try:
            if request.get("identity"):
                return {"ok": True, "identity": named(info.build_identity)(self.device)}
            folder = self.scratch_root / "build"
            return {"ok": True, "record": named(info.builder)(request["arguments"], str(folder), self.device)}
        except BaseException as exc:  # noqa: BLE001 - the build machinery failed: a reply
            return error_reply("compile", exc)

    def _load_candidate(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.backend import CompiledCandidate, CompileFailure
        from kz_core.evaluate.timing import Laps
        from kz_core.model import Candidate

        if self.role != "candidate":
            return {"ok": False, "stage": "protocol", "message": "reference workers never load candidates"}
        self.op_unload({})
        set_cpu_budget(self.cpu_budget_s)
        self.counter += 1
        workdir = Path(tempfile.mkdtemp(prefix=f"candidate-{self.counter}-", dir=self.scratch_root))
        os.chdir(workdir)
        candidate = Candidate(**request["candidate"])
        from kz_core.evaluate.execution import candidate_dirs, streams_created

        candidate_dirs.add(os.path.join(str(workdir), ""))
        threads_before = threading.active_count()
        streams_before = streams_created()
        started = time.perf_counter()
        laps = Laps()  # what the load's time goes to, as this process says: diagnostics only
        try:
            module = self.problem_module(request["problem"])
        except BaseException as exc:  # noqa: BLE001
            return error_reply("problem", exc)
        try:  # where its models are built: decided (and kept) before the candidate's code runs, from the problem alone
            self.builds_on_device(request["problem"], request["init_seed"])
        except BaseException as exc:  # noqa: BLE001
            return error_reply("problem", exc)
        laps("problem")
        self.candidate = {"workdir": workdir, "problem_module": module, "threads_before": threads_before}
        try:
            compiled = backend_hook("backend_compile", candidate.backend)(candidate=candidate, device=self.device, workdir=workdir)
        except BaseException as exc:  # noqa: BLE001 - raising at import is a compile failure
            return error_reply("compile", exc)
        compile_s = time.perf_counter() - started
        laps("compile")
        if compiled is None:
            return {
                "ok": True,
                "failure": {"message": f"no installed plugin compiles backend {candidate.backend!r}", "log": "", "verdict": "compile_error", "line": None},
            }
        if isinstance(compiled, CompileFailure):
            return {
                "ok": True,
                "compile_s": compile_s,
                "failure": {"message": compiled.message, "log": compiled.log, "verdict": compiled.verdict.value, "line": compiled.line},
            }
        assert isinstance(compiled, CompiledCandidate)
        try:
            model = self.build(compiled.model_class, module, request["problem"], request["init_seed"])
        except BaseException as exc:  # noqa: BLE001
            return error_reply("init", exc)
        self.candidate.update(compiled=compiled, model=model)
        laps("instantiate")
        return {
            "ok": True,
            "failure": None,
            "compile_s": compile_s,
            "notes": list(compiled.notes),
            "threads_started": threading.active_count() - threads_before,
            "streams_created": streams_created() - streams_before,
            "phases": laps.phases,
        }

    def op_trials(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.evaluate.execution import make_inputs, torch_compute_ops

        if not self.candidate or "model" not in self.candidate:
            return {"ok": False, "stage": "protocol", "message": "no candidate loaded"}
        module = self.candidate["problem_module"]
        model = self.candidate["model"]
        trials = []
        compute_ops: list[str] = []
        streams: list[int] = []
        started = time.perf_counter()
        try:
            for index, seed in enumerate(request["seeds"]):
                inputs = make_inputs(module, seed, self.device)
                profile = index == 0 and request.get("profile", True)
                record, seen = self._trial(model, inputs, request, profile=profile)
                if seen is not None:
                    compute_ops = torch_compute_ops(seen.op_names)
                    streams = sorted(seen.kernel_streams)
                trials.append({"seed": seed, **record})
            variant = request.get("variant")
            if variant:
                with self._sized_model(request["problem"], variant["overrides"], request["init_seed"]) as (varied, varied_model):
                    record, _ = self._trial(varied_model, make_inputs(varied, variant["seed"], self.device), request)
                trials.append({"seed": variant["seed"], "variant": variant["overrides"], **record})
        except BaseException as exc:  # noqa: BLE001 - the candidate raised or crashed torch
            from kz_core.backend import KernelCompileError

            return error_reply("compile" if isinstance(exc, KernelCompileError) else "run", exc)
        return {"ok": True, "trials": trials, "compute_ops": compute_ops, "kernel_streams": streams, "seconds": time.perf_counter() - started}

    def op_record(self, request: dict[str, Any]) -> dict[str, Any]:
        """Record the loaded candidate's forward as plans, one per input signature.

        Each signature is the problem's inputs (``overrides`` rebinds its sizes; a fuzz
        ``example`` changes values and layouts) drawn from a *decoy* seed: this process
        never sees the inputs the candidate is judged on. The forward runs ``warmup``
        times (Triton compiles and autotunes then), and the next call is recorded.
        """
        from kz_core.evaluate import recording
        from kz_core.evaluate.execution import synchronize
        from kz_core.evaluate.recording import NotReplayable, Recorder
        from kz_core.evaluate.timing import Laps

        if not self.candidate or "model" not in self.candidate:
            return {"ok": False, "stage": "protocol", "message": "no candidate loaded"}
        recording._records_plans[0] = True
        limit = request.get("max_constant_bytes", 4 << 30)  # bytes of constants a recording may hold
        plans: dict[str, Any] = {}
        captures: list[tuple[dict[str, Any], Any, Any]] = []
        started = time.perf_counter()
        laps = Laps()  # what the recording's time goes to, as this process says: diagnostics only
        for signature in request["signatures"]:
            key = signature["key"]
            sized = contextlib.ExitStack()
            try:
                module, model = sized.enter_context(self._sized_model(request["problem"], signature.get("overrides"), request["init_seed"]))
                laps("instantiate")
                inputs = self._signature_inputs(module, signature)
                synchronize(self.device)
                laps("draw inputs")
                # Warm-up calls (Triton compiles and autotunes on the first): fewer for the
                # later signatures, whose kernels are compiled already.
                for call in range(request.get("warmup", 2) if not plans else 1):
                    self._run(model, inputs)
                    if call == 0 and not plans:
                        synchronize(self.device)
                        # Apart, because Triton compiles the candidate's kernels here, with
                        # the GPU held shared (diagnostics: how much of the hold is host work)
                        laps("first call")
                laps("warm-up calls")
                recorder = Recorder(inputs, limit)
                output = recorder.call(lambda *xs: self._run(model, list(xs)), inputs)
                plan = recorder.plan(output)
                entry: dict[str, Any] = {"plan": plan, "constants": recorder.constants, "elsewhere": recorder.elsewhere[:8]}
                output = recorder = None  # the plan is taken: its outputs need not wait for the next call's
                laps("recorded calls")
                if request.get("gap") is not None:
                    # The same call again after a few more: a forward whose work changes
                    # from call to call shows here (the parent compares the two plans).
                    gap_calls(lambda: self._run(model, inputs), int(request["gap"]), float(request.get("gap_s") or 0.0))
                    laps("gap calls")
                    again = Recorder(inputs, limit, keep_constants=False)  # compared, not replayed
                    entry["again"] = again.plan(again.call(lambda *xs: self._run(model, list(xs)), inputs))
                    laps("recorded calls")
                plans[key] = entry
                if key == "default" and self.device.startswith("cuda") and request.get("capture"):
                    # Its inputs are drawn again for the capture (the same seed): kept, they
                    # would sit on the GPU through the other signatures' recordings.
                    captures.append((entry, model, functools.partial(self._signature_inputs, module, signature)))
                # This signature's outputs and the allocator's cached blocks go back before
                # the next signature allocates (a KernelBench call can move 13 GB; cached
                # blocks of one size do not serve the next's, and several such recordings
                # at once ran the GPU out of memory).
                output = inputs = None
                if self.device.startswith("cuda"):
                    self.torch.cuda.empty_cache()
                laps("release")
            except NotReplayable as exc:
                plans[key] = {"failure": str(exc), "check": exc.check}
            except BaseException as exc:  # noqa: BLE001 - the candidate raised or crashed torch
                from kz_core.backend import KernelCompileError

                return error_reply("compile" if isinstance(exc, KernelCompileError) else "run", exc)
            finally:
                sized.close()
        # Last, because a failed capture leaves torch's CUDA generator unusable: the same
        # call recorded while it is captured into a CUDA graph. A forward that behaves
        # otherwise when captured (to hide work from graph timing) shows in the parent's
        # comparison of the two recordings; one that cannot be captured is left alone.
        for entry, model, draw in captures:
            entry["captured"] = self._record_captured(model, draw, limit)
        laps("captured recording")
        return {"ok": True, "plans": plans, "seconds": time.perf_counter() - started, "phases": laps.phases}

    @contextlib.contextmanager
    def _sized_model(self, problem: dict[str, Any], overrides: dict[str, int] | None, init_seed: int) -> Any:
        """``(module, model)`` of the problem's sizes with ``overrides`` rebound: the loaded
        ones at the default sizes; else the varied problem module and a fresh ``ModelNew``,
        built and called (inside the block) with the candidate's own copies of the problem's
        size constants rebound as the varied module's are.

        A candidate often repeats the problem's module (``batch_size = 256`` beside its
        ``ModelNew``), and a module may read such a constant when it is built (KernelBench
        level 3's ``33_VanillaRNN`` keeps a ``(batch_size, hidden_size)`` state): the
        reference of the other sizes reads the rebound value, the candidate read its own
        and failed at the other sizes, honest or not. A name is rebound only where the
        candidate binds it to the problem's own default value; a size written into a
        kernel or its launch stays what it was, which is what the variation is for."""
        from kz_core.evaluate.variants import size_constants

        if not overrides:
            yield self.candidate["problem_module"], self.candidate["model"]
            return
        namespace = self.candidate["compiled"].namespace
        defaults = size_constants(problem["code"])
        saved = {}
        for name, value in overrides.items():
            if name in defaults and type(namespace.get(name)) is int and namespace[name] == defaults[name]:
                saved[name] = namespace[name]
                namespace[name] = value
        try:
            module = self.varied_module(problem, overrides)
            yield module, self.build(self.candidate["compiled"].model_class, module, problem, init_seed)
        finally:
            namespace.update(saved)

    def _signature_inputs(self, module: Any, signature: dict[str, Any]) -> list[Any]:
        """A recorded signature's inputs, drawn from its decoy seed (the same each time)."""
        from kz_core.evaluate.execution import fuzz_inputs, make_inputs

        if signature.get("example") is not None:
            return fuzz_inputs(module, {**signature["example"], "seed": signature["seed"]}, self.device)
        return make_inputs(module, signature["seed"], self.device)

    def _record_captured(self, model: Any, draw: Any, limit: int) -> Any:
        from kz_core.evaluate.recording import NotReplayable, Recorder

        torch = self.torch
        try:
            graph = torch.cuda.CUDAGraph()
            inputs = draw()
            # Compared with the first recording, never replayed: its constants' shapes are
            # enough. Copying them to the host, as a replayed recording does, is refused
            # inside a capture (pageable memory), which failed the capture of every forward
            # with a parameter, and this comparison was skipped for all of them.
            recorder = Recorder(inputs, limit, keep_constants=False)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._run_unsynchronized(model, inputs)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            # The side stream's blocks do not serve the graph's own pool: given back first.
            torch.cuda.empty_cache()
            with torch.cuda.graph(graph):
                output = recorder.call(lambda *xs: self._run_unsynchronized(model, list(xs)), inputs)
            return recorder.plan(output)
        except NotReplayable:
            return None
        except Exception:  # noqa: BLE001 - it cannot be captured; the executor times it with events
            return None

    def _backend_run(self, model: Any, inputs: list[Any]) -> Any:
        """The loaded candidate's forward through its backend's ``backend_run``: a RunOutput."""
        compiled = self.candidate["compiled"]
        output = backend_hook("backend_run", compiled.backend)(compiled=compiled, model=model, inputs=inputs)
        if output is None:
            raise RuntimeError(f"no installed plugin runs backend {compiled.backend!r}")
        return output

    def _run_unsynchronized(self, model: Any, inputs: list[Any]) -> Any:
        return self._backend_run(model, inputs).outputs

    def _run(self, model: Any, inputs: list[Any]) -> Any:
        from kz_core.evaluate.execution import synchronize

        output = self._backend_run(model, inputs)
        synchronize(self.device)
        return output.outputs

    def op_fuzz_trials(self, request: dict[str, Any]) -> dict[str, Any]:
        """The loaded candidate on fuzz examples: each with its sizes, values and layout,
        a fresh ModelNew when the sizes change, and every runtime check of a trial."""
        from kz_core.evaluate.execution import fuzz_inputs

        if not self.candidate or "model" not in self.candidate:
            return {"ok": False, "stage": "protocol", "message": "no candidate loaded"}
        trials = []
        try:
            for example in request["examples"]:
                with self._sized_model(request["problem"], example["overrides"], request["init_seed"]) as (module, model):
                    record, _ = self._trial(model, fuzz_inputs(module, example, self.device), request)
                trials.append({"seed": example["seed"], **record})
        except BaseException as exc:  # noqa: BLE001 - the candidate raised on this example
            return error_reply("run", exc)
        return {"ok": True, "trials": trials, "compute_ops": [], "kernel_streams": []}

    def _trial(self, model: Any, inputs: list[Any], request: dict[str, Any], profile: bool = False) -> tuple[dict[str, Any], Any]:
        record, seen, leaves = self._call_checked(model, inputs, request, profile)
        if request.get("share"):
            from kz_core.evaluate.execution import share_cuda_tensor

            torch = self.torch
            record["shared"] = [
                share_cuda_tensor(x) if type(x) is torch.Tensor and x.is_cuda and x.numel() else None for x in leaves
            ]
            record["outputs"] = [None for _ in leaves]
            self.candidate["held"] = leaves  # alive until the reference worker has copied them
        return record, seen

    def _call_checked(self, model: Any, inputs: list[Any], request: dict[str, Any], profile: bool) -> tuple[dict[str, Any], Any, list[Any]]:
        """One forward call with every runtime check around it.

        :returns: the trial's record, and what the profiler saw of the call (when ``profile``).
        """
        from kz_core.evaluate.execution import (
            apart_from,
            bitwise_equal,
            fingerprint,
            flatten_outputs,
            global_flags,
            poison_free_memory,
            profiled,
            restore_flags,
            storages_overlap,
            streams_created,
            synchronize,
        )

        torch = self.torch
        prints = fingerprint(inputs)
        streams_before = streams_created()
        originals = [x.clone() if isinstance(x, torch.Tensor) else None for x in inputs]
        flags = global_flags()
        threads_before = threading.active_count()
        on_gpu = self.device.startswith("cuda")
        stream_before = torch.cuda.current_stream().stream_id if on_gpu else 0
        poison_free_memory(self.device, request.get("poison_mb", 0))
        seen = None
        with profiled(self.device, self.candidate["workdir"] / "trace.json") if profile else contextlib.nullcontext() as seen:
            output = self._backend_run(model, inputs)
            synchronize(self.device)
        structure, leaves = flatten_outputs(output.outputs)
        tensor_inputs = [x for x in inputs if isinstance(x, torch.Tensor)]
        record = {
            "structure": structure,
            "launches": int(output.launches),
            "input_fingerprints": prints,
            "output_types": [f"{type(x).__module__}.{type(x).__qualname__}" for x in leaves],
            "output_devices": [str(x.device) if isinstance(x, torch.Tensor) else "" for x in leaves],
            # An output in a tensor the module keeps (rewritten every call) is copied before
            # the next trial rewrites it.
            "outputs": apart_from([x if type(x) is torch.Tensor else None for x in leaves], _module_tensors(model)),
            "mutated": [i for i, (x, o) in enumerate(zip(inputs, originals)) if o is not None and not bitwise_equal(x, o)],
            "aliased": [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor) and any(storages_overlap(x, y) for y in tensor_inputs)],
            "threads_started": threading.active_count() - threads_before,
            "stream_changed": bool(on_gpu and torch.cuda.current_stream().stream_id != stream_before),
            "streams_created": streams_created() - streams_before,
        }
        after = global_flags()
        record["flags_changed"] = {k: [str(flags[k]), str(after[k])] for k in flags if flags[k] != after[k]}
        if record["flags_changed"]:
            restore_flags(flags)
        return record, seen, leaves

    def op_time(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.evaluate.execution import synchronize, timed_output_entries, torch_compute_ops

        if not self.candidate or "model" not in self.candidate:
            return {"ok": False, "stage": "protocol", "message": "no candidate loaded"}
        module = self.candidate["problem_module"]
        model = self.candidate["model"]
        try:
            timed = self.time_forward(model, module, request, record_ops=True)
            synchronize(self.device)
            outputs, held = timed_output_entries(timed.outputs, bool(request.get("share")))
            if held:
                self.candidate["held"] = held
        except BaseException as exc:  # noqa: BLE001
            return error_reply("timing", exc)
        return {
            "ok": True,
            "stats": timed.stats,
            "timed_outputs": outputs,
            "compute_ops": torch_compute_ops(timed.torch_ops),
            "retire": timed.dirty,
            "disagreement": timed.disagreement,
        }

    def op_release(self, request: dict[str, Any]) -> dict[str, Any]:
        """Drop outputs held for a reference worker to copy."""
        if self.candidate is not None:
            self.candidate.pop("held", None)
        return {"ok": True}

    def op_unload(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.evaluate.execution import global_flags, restore_flags

        changed: dict[str, Any] = {}
        if self.candidate is not None:
            workdir = self.candidate.get("workdir")
            compiled = self.candidate.get("compiled")
            if compiled is not None:
                sys.modules.pop(compiled.namespace.get("__name__", ""), None)
            self.candidate = None
            os.chdir(self.scratch_root)
            if workdir is not None:
                remove_tree(workdir)  # the candidate wrote there: never raises
            flags = global_flags()
            changed = {k: [str(self.baseline_flags[k]), str(flags[k])] for k in flags if flags[k] != self.baseline_flags[k]}
            if changed:
                restore_flags(self.baseline_flags)
            gc.collect()
            if self.device.startswith("cuda"):
                self.torch.cuda.empty_cache()
        return {"ok": True, "flags_changed": changed}


def _module_tensors(model: Any) -> list[Any]:
    """The tensors a module keeps between calls: parameters, buffers, tensor attributes."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return []
    kept = [*model.parameters(), *model.buffers()]
    for module in model.modules():
        kept += [value for value in vars(module).values() if isinstance(value, torch.Tensor)]
    return kept
