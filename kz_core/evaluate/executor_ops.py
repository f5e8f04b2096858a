"""Requests an *executor* worker serves: replay a candidate's recorded plans on secret
inputs, with every check, and time them.

An executor is forked fresh for each candidate and runs only kz's code, the problem's
``get_inputs`` and constructor (after it has built the kernels: from then on it writes
no shared cache, ``Worker.seal_shared_caches``) and the candidate's kernels, built by the backend's ``backend_kernels``
hook from the source as data: no code of the candidate's module ever runs here. So what
it reports (which kernels and torch operations ran, whether inputs changed, whether
outputs came from the kernels, how long a call takes) is a measurement the candidate
cannot rewrite. It still decides nothing: replies go to the parent, which judges.
Mixed into ``kz_core.evaluate.worker.Worker``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kz_core.evaluate.execution import error_reply
from kz_core.plugins import backend_hook


def _unexpected(leaves: list[Any], expected: list[Any] | None) -> dict[int, str]:
    """Outputs whose dtype or shape differ from the reference's, with why: they are
    described to the parent, never sent (a forward may return a huge tensor)."""
    import torch

    if expected is None:
        return {}
    found = {}
    for index, value in enumerate(leaves):
        if not isinstance(value, torch.Tensor) or index >= len(expected):
            continue
        dtype, shape = expected[index]
        if str(value.dtype) != dtype or list(value.shape) != list(shape):
            found[index] = f"{str(value.dtype).removeprefix('torch.')}{tuple(value.shape)}, the reference {str(dtype).removeprefix('torch.')}{tuple(shape)}"
    return found


class ExecutorOps:
    """The executor role's requests (state lives in ``Worker``)."""

    def op_prepare(self, request: dict[str, Any]) -> dict[str, Any]:
        """Build the candidate's kernels and take its plans: ``{key: (plan, constants)}``."""
        from kz_core.backend import CompileFailure
        from kz_core.evaluate.plans import PlanError, Replay, validate_plan
        from kz_core.evaluate.timing import Laps
        from kz_core.model import Candidate

        if self.role != "executor":
            return {"ok": False, "stage": "protocol", "message": "only executors replay plans"}
        candidate = Candidate(**request["candidate"])
        workdir = Path(self.scratch_root) / "kernels"
        workdir.mkdir(exist_ok=True)
        started = time.perf_counter()
        laps = Laps()  # diagnostics only; the request's time beyond them is its transfer
        try:
            kernels = backend_hook("backend_kernels", candidate.backend)(candidate=candidate, device=self.device, workdir=workdir)
        except BaseException as exc:  # noqa: BLE001 - a kernel that cannot be built
            return error_reply("compile", exc)
        if kernels is None:
            return {"ok": False, "stage": "protocol", "message": f"no installed plugin builds trusted kernels for backend {candidate.backend!r}"}
        if isinstance(kernels, CompileFailure):
            return {"ok": True, "failure": {"message": kernels.message, "log": kernels.log, "verdict": kernels.verdict.value, "line": kernels.line}}
        self.kernels = kernels
        laps("build kernels")
        self.plans: dict[str, Any] = {}
        try:
            for key, (plan, constants) in request["plans"].items():
                validate_plan(plan, candidate.backend, len(constants))
                self.plans[key] = Replay(plan, constants, kernels.launch, self.device, reinterpreting=kernels.reinterprets, reinterpreted_now=kernels.reinterpreted_last)
        except PlanError as exc:
            return {"ok": True, "failure": {"message": f"the recorded plan is malformed: {exc}", "log": "", "verdict": "runtime_error", "line": None, "check": "not_replayable"}}
        except BaseException as exc:  # noqa: BLE001
            return error_reply("problem", exc)
        laps("take plans")  # their constants placed on the device
        if self.device.startswith("cuda"):
            for replay in self.plans.values():
                replay.precompile(kernels.precompile)
        laps("precompile")
        # The checks' kernels were loaded when this executor started (Worker.warm_up_checks).
        # Last: the problem's code may be model-written, and loading it seals the shared
        # kernel caches (Worker.seal_shared_caches) that the builds above wrote.
        try:
            self.problem = self.problem_module(request["problem"])
        except BaseException as exc:  # noqa: BLE001
            return error_reply("problem", exc)
        laps("problem")
        return {"ok": True, "failure": None, "seconds": time.perf_counter() - started, "notes": list(kernels.describe()), "phases": laps.phases}

    def op_add_plans(self, request: dict[str, Any]) -> dict[str, Any]:
        """More plans for the prepared candidate (fuzz examples at other sizes)."""
        from kz_core.evaluate.plans import PlanError, Replay, validate_plan

        try:
            for key, (plan, constants) in request["plans"].items():
                validate_plan(plan, self.kernels.backend, len(constants))
                self.plans[key] = Replay(plan, constants, self.kernels.launch, self.device, reinterpreting=self.kernels.reinterprets, reinterpreted_now=self.kernels.reinterpreted_last)
        except PlanError as exc:
            return {"ok": False, "stage": "run", "message": f"the recorded plan is malformed: {exc}", "check": "not_replayable"}
        except BaseException as exc:  # noqa: BLE001
            return error_reply("run", exc)
        return {"ok": True}

    def _inputs(self, trial: dict[str, Any], request: dict[str, Any]) -> tuple[Any, list[Any]]:
        """The module and inputs of one trial: the problem's, at other sizes, or a fuzz example."""
        from kz_core.evaluate.execution import fuzz_inputs, make_inputs

        module = self.varied_module(request["problem"], trial["overrides"]) if trial.get("overrides") else self.problem
        if trial.get("example") is not None:
            return module, fuzz_inputs(module, trial["example"], self.device)
        return module, make_inputs(module, trial["seed"], self.device)

    def op_execute(self, request: dict[str, Any]) -> dict[str, Any]:
        """Replay plans on the trials' inputs, with every check around each call."""
        from kz_core.evaluate.execution import (
            apart_from,
            bitwise_equal,
            fingerprint,
            flatten_outputs,
            poison_free_memory,
            share_cuda_tensor,
            storages_overlap,
            synchronize,
        )
        from kz_core.evaluate.timing import Laps

        torch = self.torch
        records = []
        held = []
        laps = Laps()
        started = time.perf_counter()
        try:
            for trial in request["trials"]:
                replay = self.plans.get(trial["plan"])
                if replay is None:
                    return {"ok": False, "stage": "protocol", "message": f"no plan {trial['plan']!r}"}
                laps.restart()
                _, inputs = self._inputs(trial, request)
                synchronize(self.device)
                laps("draw inputs")
                prints = fingerprint(inputs)
                synchronize(self.device)
                laps("fingerprint inputs")
                originals = [x.clone() if isinstance(x, torch.Tensor) else None for x in inputs]
                synchronize(self.device)
                laps("keep inputs")
                poison_free_memory(self.device, request.get("poison_mb", 0))
                synchronize(self.device)
                laps("poison")
                provenance: dict[str, Any] = {}
                output = replay(*inputs, provenance=provenance)
                synchronize(self.device)
                laps("replay")
                structure, leaves = flatten_outputs(output)
                # An output in one of the plan's constants (a buffer the forward keeps and
                # rewrites) is copied before the next trial rewrites it.
                leaves = apart_from(leaves, replay.constants)
                tensor_inputs = [x for x in inputs if isinstance(x, torch.Tensor)]
                withheld = _unexpected(leaves, trial.get("expected"))
                record = {
                    "seed": trial["seed"],
                    "structure": structure,
                    "launches": replay.launches,
                    "compute_ops": replay.compute_ops,
                    "host_reads": list(replay.host_reads),
                    "input_fingerprints": prints,
                    "output_types": [f"{type(x).__module__}.{type(x).__qualname__}" for x in leaves],
                    "output_devices": [str(x.device) if isinstance(x, torch.Tensor) else "" for x in leaves],
                    "outputs": [x if type(x) is torch.Tensor and i not in withheld else None for i, x in enumerate(leaves)],
                    "withheld": [[i, reason] for i, reason in withheld.items()],
                    "mutated": [i for i, (x, o) in enumerate(zip(inputs, originals)) if o is not None and not bitwise_equal(x, o)],
                    "aliased": [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor) and any(storages_overlap(x, y) for y in tensor_inputs)],
                    "not_from_kernel": [
                        [i, writer] for i, (derived, writer) in enumerate(zip(provenance.get("kernel_derived", []), provenance.get("writers", []))) if not derived
                    ],
                    "threads_started": 0,
                    "stream_changed": False,
                    "streams_created": 0,
                    "flags_changed": {},
                }
                if trial.get("variant"):  # the size-variation trial (fuzz examples are not)
                    record["variant"] = trial["overrides"]
                synchronize(self.device)
                laps("check outputs")
                if request.get("share"):
                    record["shared"] = [
                        share_cuda_tensor(x) if type(x) is torch.Tensor and x.is_cuda and x.numel() and i not in withheld else None for i, x in enumerate(leaves)
                    ]
                    record["outputs"] = [None for _ in leaves]
                    held.append(leaves)
                    laps("share outputs")
                records.append(record)
                del originals
        except BaseException as exc:  # noqa: BLE001 - a kernel that fails or crashes the device
            from kz_core.backend import KernelCompileError

            reply = error_reply("compile" if isinstance(exc, KernelCompileError) else "run", exc)
            if isinstance(getattr(exc, "check", None), str):
                reply["check"] = exc.check  # a named finding (a kernel not in the source)
            return reply
        self.held = held
        return {"ok": True, "trials": records, "seconds": time.perf_counter() - started, "phases": laps.phases}

    def op_time_plan(self, request: dict[str, Any]) -> dict[str, Any]:
        """Time the default plan's replay (graph replays on a GPU) on the timing seeds."""
        from kz_core.evaluate.execution import synchronize, timed_output_entries

        replay = self.plans.get(request["plan"])
        if replay is None:
            return {"ok": False, "stage": "protocol", "message": f"no plan {request['plan']!r}"}
        replay.judging = False  # judged in the trials; a timed call runs the plan alone
        try:
            timed = self.time_forward(replay, self.problem, request)
            synchronize(self.device)
            if replay.untouched_constant_changed():
                replay.timed_compute_ops.setdefault("a module constant no kernel or op was given in the trials changed in the timed calls", None)
            if replay.bits_tested_in_timed_calls():
                replay.timed_compute_ops.setdefault(
                    "a conversion that moved values in the trials tested their bits in the timed calls (a negative value sign-extended, or a truth value made from other than 0 or 1)",
                    None,
                )
            outputs, self.held = timed_output_entries(timed.outputs, bool(request.get("share")))
        except BaseException as exc:  # noqa: BLE001
            reply = error_reply("timing", exc)
            if isinstance(getattr(exc, "check", None), str):
                reply["check"] = exc.check  # a named finding (a kernel writing outside what it was given)
            return reply
        finally:
            replay.judging = True
        return {
            "ok": True,
            "stats": timed.stats,
            "timed_outputs": outputs,
            "compute_ops": list(replay.timed_compute_ops),
            "retire": timed.dirty,
            "disagreement": timed.disagreement,
            "phases": timed.phases,
        }

    def op_release_held(self, request: dict[str, Any]) -> dict[str, Any]:
        self.held = []
        return {"ok": True}
