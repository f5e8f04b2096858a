"""The evaluation worker: a separate process that runs problems and candidates.

Started by ``kz_core/evaluate/sandbox.py`` as ``python -m kz_core.evaluate.worker FD`` in
a new session (its own process group), with a reduced environment. It applies resource
limits, imports torch and initialises the device once, loads the kz plugins, and then
serves requests until told to stop. A worker has one role for its whole life:

- ``reference`` workers run problems' reference modules and time baselines; model-written
  candidate code never runs in them;
- ``candidate`` workers compile and run candidates through the backend hooks.

Replies carry measurements only (outputs, fingerprints, launch counts, flags, timings);
the parent compares and decides the verdict. Replies are encoded with
``kz_core/evaluate/wire.py`` so that the parent never unpickles what a worker sends.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from kz_core.evaluate import wire

CUDA_FATAL_MARKERS = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "misaligned address",
    "CUDA error",
    "cudaErrorLaunchFailure",
    "an illegal instruction",
)


def apply_limits(limits: dict[str, int]) -> None:
    """Resource limits for this process and its children (0 = leave unlimited)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("address_space_bytes"):
        value = limits["address_space_bytes"]
        resource.setrlimit(resource.RLIMIT_AS, (value, value))
    if limits.get("file_size_bytes"):
        value = limits["file_size_bytes"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (value, value))


def set_cpu_budget(seconds: int) -> None:
    """Allow ``seconds`` more CPU time from now (SIGXCPU ends the process beyond it)."""
    if seconds <= 0:
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    total = int(used.ru_utime + used.ru_stime) + seconds
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (total if hard == resource.RLIM_INFINITY else min(total, hard), hard))


def _error_reply(stage: str, exc: BaseException) -> dict[str, Any]:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    message = f"{type(exc).__name__}: {exc}"
    return {
        "ok": False,
        "stage": stage,
        "error": type(exc).__name__,
        "message": message[:2000],
        "traceback": text[-6000:],
        "cuda_error": any(marker in message for marker in CUDA_FATAL_MARKERS),
    }


def _meta(value: Any) -> dict[str, Any]:
    """Type, dtype, shape and size of one output, without its data."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"type": type(value).__name__, "dtype": str(value.dtype), "shape": list(value.shape), "nbytes": value.nbytes}
    return {"type": type(value).__name__, "dtype": "", "shape": [], "nbytes": 0}


def _backend_versions() -> str:
    import importlib.metadata

    found = []
    for name in ("triton", "cuda-python"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


class Worker:
    """One worker's state between requests."""

    def __init__(self, init: dict[str, Any]):
        self.device: str = init["device"]
        self.role: str = init["role"]
        self.scratch_root = Path(init["scratch_root"])
        self.cpu_budget_s: int = init.get("cpu_budget_s", 0)
        self.problems: dict[str, Any] = {}
        self.references: dict[tuple[str, int], Any] = {}
        self.compare_models: dict[tuple[str, int, str], Any] = {}
        self.candidate: dict[str, Any] | None = None
        self.counter = 0
        import torch

        self.torch = torch
        if self.device.startswith("cuda"):
            torch.cuda.set_device(self.device)
            torch.cuda.init()
            torch.empty(1, device=self.device)  # create the context now, not in a timed call
            from kz_core.evaluate.execution import count_stream_creation

            count_stream_creation()
        from kz_core.evaluate.execution import global_flags, set_tf32

        set_tf32(bool(init.get("tf32", False)))
        torch.set_grad_enabled(False)
        self.baseline_flags = global_flags()
        from kz_core.plugins import get_plugin_manager

        self.pm = get_plugin_manager()

    # -- helpers ------------------------------------------------------------------------

    def identity(self) -> dict[str, Any]:
        torch = self.torch
        info = {
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "device": self.device,
            "device_name": "cpu",
            "driver": "",
            "backend_versions": _backend_versions(),
        }
        if self.device.startswith("cuda"):
            props = torch.cuda.get_device_properties(self.device)
            info["device_name"] = props.name
            info["driver"] = str(torch.version.cuda or "")
            info["l2_bytes"] = int(getattr(props, "L2_cache_size", 0))
        return info

    def problem_module(self, problem: dict[str, Any]) -> Any:
        from kz_core.evaluate.execution import load_module

        key = problem["hash"]
        if key not in self.problems:
            folder = Path(tempfile.mkdtemp(prefix="problem-", dir=self.scratch_root))
            self.problems[key] = load_module(problem["code"], f"kz_problem_{key[:12]}", str(folder / f"{problem['name']}.py"))
        return self.problems[key]

    def varied_module(self, problem: dict[str, Any], overrides: dict[str, int]) -> Any:
        """A fresh copy of the problem's module with size constants rebound."""
        from kz_core.evaluate.execution import load_module

        self.counter += 1
        folder = Path(tempfile.mkdtemp(prefix="variant-", dir=self.scratch_root))
        module = load_module(problem["code"], f"kz_problem_{problem['hash'][:12]}_v{self.counter}", str(folder / f"{problem['name']}.py"))
        for name, value in overrides.items():
            setattr(module, name, value)
        return module

    # -- reference role -----------------------------------------------------------------

    def op_reference(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.evaluate.execution import (
            fingerprint,
            flatten_outputs,
            instantiate,
            make_init_inputs,
            make_inputs,
            synchronize,
        )

        started = time.perf_counter()
        try:
            module = self.problem_module(request["problem"])
            key = (request["problem"]["hash"], request["init_seed"])
            if key not in self.references:
                init_inputs = make_init_inputs(module, request["init_seed"])
                self.references.clear()  # one reference model at a time: they can be large
                self.references[key] = instantiate(module.Model, init_inputs, request["init_seed"], self.device)
            model = self.references[key]
        except BaseException as exc:  # noqa: BLE001 - a broken problem is a reply
            return _error_reply("problem", exc)
        trials = []
        try:
            for seed in request["seeds"]:
                inputs = make_inputs(module, seed, self.device)
                prints = fingerprint(inputs)
                output = model(*inputs)
                synchronize(self.device)
                structure, leaves = flatten_outputs(output)
                on_device = sum(x.nbytes for x in leaves if isinstance(x, self.torch.Tensor)) > request.get("max_transfer_bytes", 1 << 62)
                trials.append(
                    {
                        "seed": seed,
                        "structure": structure,
                        "outputs": [None if on_device else x for x in leaves],
                        "output_meta": [_meta(x) for x in leaves],
                        "on_device": on_device,
                        "output_devices": [str(x.device) if isinstance(x, self.torch.Tensor) else "" for x in leaves],
                        "input_fingerprints": prints,
                        "input_bytes": sum(x.nbytes for x in inputs if isinstance(x, self.torch.Tensor)),
                    }
                )
        except BaseException as exc:  # noqa: BLE001
            return _error_reply("reference", exc)
        variant = None
        for overrides in request.get("variations", []):
            try:
                varied = self.varied_module(request["problem"], overrides)
                varied_model = instantiate(varied.Model, make_init_inputs(varied, request["init_seed"]), request["init_seed"], self.device)
                inputs = make_inputs(varied, request["variant_seed"], self.device)
                prints = fingerprint(inputs)
                structure, leaves = flatten_outputs(varied_model(*inputs))
                synchronize(self.device)
            except BaseException:  # noqa: BLE001 - this rebinding does not suit the problem
                continue
            on_device = sum(x.nbytes for x in leaves if isinstance(x, self.torch.Tensor)) > request.get("max_transfer_bytes", 1 << 62)
            variant = {
                "overrides": overrides,
                "trial": {
                    "seed": request["variant_seed"],
                    "structure": structure,
                    "outputs": [None if on_device else x for x in leaves],
                    "output_meta": [_meta(x) for x in leaves],
                    "on_device": on_device,
                    "output_devices": [str(x.device) if isinstance(x, self.torch.Tensor) else "" for x in leaves],
                    "input_fingerprints": prints,
                    "input_bytes": sum(x.nbytes for x in inputs if isinstance(x, self.torch.Tensor)),
                },
            }
            break
        return {"ok": True, "trials": trials, "variant": variant, "seconds": time.perf_counter() - started}

    def op_compare(self, request: dict[str, Any]) -> dict[str, Any]:
        """Compare a candidate's GPU outputs, shared through CUDA IPC, with the reference's.

        For outputs too large to send to the parent. The reference is recomputed here for
        the seed; the candidate's tensors are cloned out of its memory before comparing.
        """
        import json as _json

        from kz_core.evaluate.correctness import compare_outputs
        from kz_core.evaluate.execution import (
            flatten_outputs,
            instantiate,
            make_init_inputs,
            make_inputs,
            open_shared_cuda_tensor,
            synchronize,
        )
        from kz_core.model import Finding, Problem
        from kz_core.serialization import to_json_dict

        if self.role != "reference":
            return {"ok": False, "stage": "protocol", "message": "only reference workers compare outputs"}
        problem = request["problem"]
        overrides = request.get("overrides") or {}
        try:
            key = (problem["hash"], request["init_seed"], _json.dumps(overrides, sort_keys=True))
            if key not in self.compare_models:
                module = self.varied_module(problem, overrides) if overrides else self.problem_module(problem)
                self.compare_models.clear()  # one reference model at a time
                self.compare_models[key] = (module, instantiate(module.Model, make_init_inputs(module, request["init_seed"]), request["init_seed"], self.device))
            module, model = self.compare_models[key]
            _, expected = flatten_outputs(model(*make_inputs(module, request["seed"], self.device)))
            synchronize(self.device)
        except BaseException as exc:  # noqa: BLE001
            return _error_reply("reference", exc)
        actual: list[Any] = []
        findings: list[Finding] = []
        for index, description in enumerate(request["shared"]):
            if description is None:
                actual.append(None)
                continue
            try:
                actual.append(open_shared_cuda_tensor(description))
            except Exception as exc:  # noqa: BLE001 - a forged or stale description
                findings.append(Finding("output_type", f"{request['label']}, output {index}: could not be read from the candidate's process ({exc})"))
                actual.append(None)
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
        if self.device.startswith("cuda"):
            self.torch.cuda.empty_cache()
        return {"ok": True, "findings": [to_json_dict(f) for f in findings + compared], "max_abs_error": max_abs, "max_rel_error": max_rel}

    def op_audit(self, request: dict[str, Any]) -> dict[str, Any]:
        """Reference outputs for an audit: two seeds, the first again, and with TF32 on."""
        from kz_core.evaluate.execution import (
            flatten_outputs,
            global_flags,
            instantiate,
            make_init_inputs,
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
            model = instantiate(module.Model, make_init_inputs(module, request["init_seed"]), request["init_seed"], self.device)
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

        try:
            runs = {"first": run(first), "second": run(second), "again": run(first, reseed=True)}
            if self.device.startswith("cuda"):
                runs["tf32"] = run(first, tf32=True)
        except BaseException as exc:  # noqa: BLE001 - a broken problem is a finding
            return _error_reply("reference", exc)
        return {"ok": True, "runs": runs}

    def op_baseline(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.evaluate.execution import instantiate, make_init_inputs, make_inputs
        from kz_core.evaluate.timing import TimingSettings, time_calls

        try:
            module = self.problem_module(request["problem"])
            init_inputs = make_init_inputs(module, request["init_seed"])
            model = instantiate(module.Model, init_inputs, request["init_seed"], self.device)
            if request["mode"] == "compile":
                model = self.torch.compile(model)
            input_sets = [make_inputs(module, seed, self.device) for seed in request["seeds"]]
            stats = time_calls(lambda i: model(*input_sets[i % len(input_sets)]), self.device, TimingSettings(**request["settings"]))
        except BaseException as exc:  # noqa: BLE001
            return _error_reply("baseline", exc)
        finally:
            if request["mode"] == "compile":
                self.torch._dynamo.reset()
        return {"ok": True, "stats": stats}

    # -- candidate role -----------------------------------------------------------------

    def op_load(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.backend import CompiledCandidate, CompileFailure
        from kz_core.evaluate.execution import instantiate, make_init_inputs
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
        try:
            module = self.problem_module(request["problem"])
        except BaseException as exc:  # noqa: BLE001
            return _error_reply("problem", exc)
        self.candidate = {"workdir": workdir, "problem_module": module, "threads_before": threads_before}
        try:
            compiled = self.pm.hook.backend_compile(candidate=candidate, device=self.device, workdir=workdir)
        except BaseException as exc:  # noqa: BLE001 - raising at import is a compile failure
            return _error_reply("compile", exc)
        compile_s = time.perf_counter() - started
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
            init_inputs = make_init_inputs(module, request["init_seed"])
            model = instantiate(compiled.model_class, init_inputs, request["init_seed"], self.device)
        except BaseException as exc:  # noqa: BLE001
            return _error_reply("init", exc)
        self.candidate.update(compiled=compiled, model=model)
        return {
            "ok": True,
            "failure": None,
            "compile_s": compile_s,
            "notes": list(compiled.notes),
            "threads_started": threading.active_count() - threads_before,
            "streams_created": streams_created() - streams_before,
        }

    def op_trials(self, request: dict[str, Any]) -> dict[str, Any]:
        from kz_core.evaluate.execution import instantiate, make_init_inputs, make_inputs, torch_compute_ops

        torch = self.torch
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
                varied = self.varied_module(request["problem"], variant["overrides"])
                varied_model = instantiate(
                    self.candidate["compiled"].model_class, make_init_inputs(varied, request["init_seed"]), request["init_seed"], self.device
                )
                record, _ = self._trial(varied_model, make_inputs(varied, variant["seed"], self.device), request)
                trials.append({"seed": variant["seed"], "variant": variant["overrides"], **record})
        except BaseException as exc:  # noqa: BLE001 - the candidate raised or crashed torch
            from kz_core.backend import KernelCompileError

            return _error_reply("compile" if isinstance(exc, KernelCompileError) else "run", exc)
        return {"ok": True, "trials": trials, "compute_ops": compute_ops, "kernel_streams": streams, "seconds": time.perf_counter() - started}

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
            output = self.pm.hook.backend_run(compiled=self.candidate["compiled"], model=model, inputs=inputs)
            synchronize(self.device)
        if output is None:
            raise RuntimeError(f"no installed plugin runs backend {self.candidate['compiled'].backend!r}")
        structure, leaves = flatten_outputs(output.outputs)
        tensor_inputs = [x for x in inputs if isinstance(x, torch.Tensor)]
        record = {
            "structure": structure,
            "launches": int(output.launches),
            "input_fingerprints": prints,
            "output_types": [f"{type(x).__module__}.{type(x).__qualname__}" for x in leaves],
            "output_devices": [str(x.device) if isinstance(x, torch.Tensor) else "" for x in leaves],
            "outputs": [x if type(x) is torch.Tensor else None for x in leaves],
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
        from kz_core.evaluate.execution import flatten_outputs, make_inputs, synchronize
        from kz_core.evaluate.timing import TimingSettings, time_calls

        if not self.candidate or "model" not in self.candidate:
            return {"ok": False, "stage": "protocol", "message": "no candidate loaded"}
        module = self.candidate["problem_module"]
        model = self.candidate["model"]
        try:
            input_sets = [make_inputs(module, seed, self.device) for seed in request["seeds"]]
            last: dict[int, Any] = {}

            def call(index: int) -> None:
                which = index % len(input_sets)
                last[which] = model(*input_sets[which])

            stats = time_calls(call, self.device, TimingSettings(**request["settings"]))
            synchronize(self.device)
            outputs = []
            held = []
            for which, seed in enumerate(request["seeds"]):
                structure, leaves = flatten_outputs(last[which])
                entry = {"seed": seed, "structure": structure, "outputs": [x if type(x) is self.torch.Tensor else None for x in leaves]}
                if request.get("share"):
                    from kz_core.evaluate.execution import share_cuda_tensor

                    entry["shared"] = [share_cuda_tensor(x) if type(x) is self.torch.Tensor and x.is_cuda and x.numel() else None for x in leaves]
                    entry["outputs"] = [None for _ in leaves]
                    held.append(leaves)
                outputs.append(entry)
            if held:
                self.candidate["held"] = held
        except BaseException as exc:  # noqa: BLE001
            return _error_reply("timing", exc)
        return {"ok": True, "stats": stats, "timed_outputs": outputs}

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
                shutil.rmtree(workdir, ignore_errors=True)
            flags = global_flags()
            changed = {k: [str(self.baseline_flags[k]), str(flags[k])] for k in flags if flags[k] != self.baseline_flags[k]}
            if changed:
                restore_flags(self.baseline_flags)
            gc.collect()
            if self.device.startswith("cuda"):
                self.torch.cuda.empty_cache()
        return {"ok": True, "flags_changed": changed}


def serve(sock: socket.socket) -> None:
    init = wire.recv_request(sock)
    try:
        apply_limits(init.get("limits", {}))
        worker = Worker(init)
    except BaseException as exc:  # noqa: BLE001 - report why the worker cannot start
        wire.send_reply(sock, _error_reply("start", exc))
        return
    wire.send_reply(sock, {"ok": True, "identity": worker.identity()})
    handlers = {
        "reference": worker.op_reference,
        "baseline": worker.op_baseline,
        "audit": worker.op_audit,
        "load": worker.op_load,
        "trials": worker.op_trials,
        "time": worker.op_time,
        "unload": worker.op_unload,
        "release": worker.op_release,
        "compare": worker.op_compare,
    }
    while True:
        try:
            request = wire.recv_request(sock)
        except (wire.WireError, OSError, EOFError):
            return
        op = request.get("op")
        if op == "shutdown":
            return
        handler = handlers.get(op)
        reply = handler(request) if handler else {"ok": False, "stage": "protocol", "message": f"unknown op {op!r}"}
        try:
            wire.send_reply(sock, reply)
        except TypeError as exc:  # an output that cannot be encoded
            wire.send_reply(sock, _error_reply("reply", exc))


def main() -> None:
    fd = int(sys.argv[1])
    sock = socket.socket(fileno=fd)
    try:
        serve(sock)
    finally:
        sock.close()
        # Skip interpreter teardown: candidate code may have left threads or CUDA state.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(json.dumps({"error": "usage: python -m kz_core.evaluate.worker FD"}), file=sys.stderr)
        sys.exit(2)
    main()
