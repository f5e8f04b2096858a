"""The evaluation worker: a separate process that runs problems and candidates.

Started by ``kz_core/evaluate/sandbox.py`` as ``python -m kz_core.evaluate.worker FD`` in
a new session (its own process group), with a reduced environment. It applies resource
limits, imports torch and initialises the device once, loads the kz plugins, and then
serves requests until told to stop. A worker has one role for its whole life:

- ``reference`` workers run problems' reference modules and time baselines; model-written
  candidate code never runs in them;
- ``candidate`` workers load a candidate (model-written code: they are sandboxed and
  forked fresh for it) and record its forward as plans; for a backend without trusted
  kernels they run its trials and timing themselves;
- ``executor`` workers replay a candidate's plans on secret inputs with its kernels,
  built from the source by the backend's ``backend_kernels`` hook (no candidate code
  runs in them), check every call and time it.

Replies carry measurements only (outputs, fingerprints, launch counts, flags, timings);
the parent compares and decides the verdict. Replies are encoded with
``kz_core/evaluate/wire.py`` so that the parent never unpickles what a worker sends.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from kz_core.evaluate import wire
from kz_core.evaluate.candidate_ops import CandidateOps
from kz_core.evaluate.execution import error_reply
from kz_core.evaluate.executor_ops import ExecutorOps
from kz_core.evaluate.reference_ops import ReferenceOps


def apply_limits(limits: dict[str, int]) -> None:
    """Resource limits for this process and its children (0 = leave unlimited)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.get("address_space_bytes"):
        value = limits["address_space_bytes"]
        resource.setrlimit(resource.RLIMIT_AS, (value, value))
    if limits.get("file_size_bytes"):
        value = limits["file_size_bytes"]
        resource.setrlimit(resource.RLIMIT_FSIZE, (value, value))


def _backend_versions() -> str:
    """The versions of what the registered backends name (``BackendInfo.versions``)."""
    import importlib.metadata

    from kz_core.plugins import backends

    found = []
    for name in dict.fromkeys(name for info in backends().values() for name in info.versions):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


class Worker(ReferenceOps, CandidateOps, ExecutorOps):
    """One worker's state between requests."""

    def __init__(self, init: dict[str, Any], sandbox: dict[str, Any] | None = None):
        self.device: str = init["device"]
        #: How the zygote placed this worker (``sandbox.sandbox_spec``); None when trusted.
        self.sandbox = sandbox
        self.sealed = False
        self.role: str = init["role"]
        self.scratch_root = Path(init["scratch_root"])
        self.cpu_budget_s: int = init.get("cpu_budget_s", 0)
        self.problems: dict[str, Any] = {}
        self.references: dict[tuple[str, int], Any] = {}
        self.compare_models: dict[tuple[str, int, str], Any] = {}
        #: Bytes of parameters and buffers from which a problem's models are built on the
        #: GPU (``builds_on_device``; 0: never), and what was decided per problem.
        self.device_init_bytes: int = int(init.get("device_init_bytes", 0))
        self.device_inits: dict[tuple[str, int], bool] = {}
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
            self.warm_up_libraries()
            if self.role in ("reference", "executor"):
                self.warm_up_checks()
        from kz_core.evaluate.execution import global_flags, set_tf32

        set_tf32(bool(init.get("tf32", False)))
        torch.set_grad_enabled(False)
        from kz_core.evaluate.recording import dispatch_inductor_helpers

        dispatch_inductor_helpers()  # before any candidate's code binds them
        self.baseline_flags = global_flags()
        from kz_core.plugins import get_plugin_manager

        self.pm = get_plugin_manager()

    # -- helpers ------------------------------------------------------------------------

    def warm_up_libraries(self) -> None:
        """Open cuBLAS and cuDNN while this worker starts, with nothing of the GPU held
        (pools start workers ahead of need). Every worker is a fresh process, and its first
        matrix product and first convolution opened them inside a request that held the
        GPU shared (a candidate's warm-up calls, an executor's first replay, a reference's
        first call), while every timing waiting for the lock waited for it: on an H200, a
        first cuBLAS matmul took 101 ms, a first cuDNN convolution 97 ms, and a
        KernelBench-sized convolution 91 ms the first time but 14 ms once a small one had
        run (``benchmarks/first_use_costs.py``). Tiny shapes, trusted code, before any
        candidate's code is loaded; what fails here is opened by the first call that
        needs it, as before."""
        torch = self.torch
        with contextlib.suppress(Exception):
            square = torch.ones(16, 16, device=self.device)
            torch.nn.functional.linear(square, square, square[0])
            image = torch.ones(1, 4, 8, 8, device=self.device)
            torch.nn.functional.conv2d(image, torch.ones(4, 4, 3, 3, device=self.device))
            torch.cuda.synchronize(self.device)

    def warm_up_checks(self) -> None:
        """Load the checks' Triton kernels (``kz_core.evaluate.device_checks``) while this
        worker starts (pools start workers ahead of need), with nothing of the GPU held. A
        reference worker serves one problem and an executor one candidate, so every one
        loaded them again (0.6 s on an H200 from a warm cache): a reference worker in its
        first request, with the GPU shared (level 1 spent 83 s of its references' 140 s in
        "fingerprint inputs"), an executor in its prepare. An executor starts before it is
        sealed, so a cold cache it fills is the shared one, as at prepare."""
        from kz_core.evaluate.correctness import kernel_checks

        device_checks = kernel_checks()
        if device_checks is not None:
            with contextlib.suppress(Exception):  # the checks then fall back to torch operations
                device_checks.warm_up(self.device)

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
            info["memory_bytes"] = int(props.total_memory)
            # What was free when this worker started: less than the total where another
            # process (kz train's policy, on the same GPU) holds memory.
            info["memory_free_bytes"] = int(torch.cuda.mem_get_info(self.device)[0])
        return info

    def seal_shared_caches(self) -> None:
        """Before an executor first runs the problem's code: from now on it writes no
        cache another process reads.

        An executor writes the shared kernel caches while it builds the candidate's
        kernels (kz's code only), then runs the problem's ``get_inputs`` and constructor,
        which may be model-written (the Proposer's modules). Triton now writes into this
        worker's scratch folder and reads the shared cache (as candidate workers do: the
        backends' ``sealed_executor`` environment), and a second Landlock layer takes the
        shared caches off the writable folders."""
        if self.sealed or self.role != "executor":
            return
        self.sealed = True
        from kz_core.evaluate.sandbox import backend_environment
        from kz_core.paths import cache_dir

        os.environ.update(backend_environment("sealed_executor", self.scratch_root, cache_dir()))
        spec = self.sandbox
        if spec and spec.get("landlock"):
            from kz_core.evaluate import isolation

            shm = ["/dev/shm"] if "/dev/shm" in spec["write_paths"] else []  # a GPU's CUDA IPC
            writable = [str(self.scratch_root), *shm, f"/proc/{os.getpid()}/task"]
            readable = [*spec["read_paths"], *(p for p in spec["write_paths"] if p not in writable)]
            isolation.apply_landlock(readable, writable, spec["device_paths"], spec.get("lookup_paths", ()))

    def problem_module(self, problem: dict[str, Any]) -> Any:
        from kz_core.evaluate.execution import load_module

        key = problem["hash"]
        self.seal_shared_caches()
        if key not in self.problems:
            folder = Path(tempfile.mkdtemp(prefix="problem-", dir=self.scratch_root))
            self.problems[key] = load_module(problem["code"], f"kz_problem_{key[:12]}", str(folder / f"{problem['name']}.py"))
        return self.problems[key]

    def builds_on_device(self, problem: dict[str, Any], init_seed: int) -> bool:
        """Whether the problem's models, at any sizes, are built with the GPU as torch's
        default device (``execution.instantiate``): when its reference ``Model`` at its own
        sizes holds at least ``device_init_bytes`` of parameters and buffers, as found on
        torch's meta device. Every worker decides the same from the problem alone, so that a
        candidate and its reference draw their weights from the same generator."""
        if not self.device_init_bytes or not self.device.startswith("cuda"):
            return False
        key = (problem["hash"], init_seed)
        if key not in self.device_inits:
            from kz_core.evaluate.execution import module_bytes, restore_flags

            try:
                found = module_bytes(self.problem_module(problem), init_seed)
            finally:
                restore_flags(self.baseline_flags)  # whatever the module changed
            self.device_inits[key] = found is not None and found >= self.device_init_bytes
        return self.device_inits[key]

    def build(self, model_class: type, module: Any, problem: dict[str, Any], init_seed: int) -> Any:
        """``model_class`` (the problem's ``Model``, or a candidate's ``ModelNew``) built at
        the sizes of ``module`` (the problem's module, or a size variation of it), as every
        worker builds it: right after ``init_seed``, where ``builds_on_device`` says."""
        from kz_core.evaluate.execution import instantiate, make_init_inputs

        on_device = self.builds_on_device(problem, init_seed)
        return instantiate(model_class, make_init_inputs(module, init_seed), init_seed, self.device, on_device)

    def time_forward(self, forward: Any, module: Any, request: dict[str, Any], record_ops: bool = False) -> Any:
        """Time ``forward`` on the problem ``module``'s inputs as a ``time`` or ``baseline``
        request asks (its ``seeds``, ``decoys`` and ``settings``; with ``agree``, the
        tolerance table and ``atol``/``rtol`` every timed call must agree with its input
        set's first call within; with ``unseen``, seeds of inputs for calls timed after
        the others): a ``timing.Timed``."""
        from kz_core.evaluate.correctness import Agreement
        from kz_core.evaluate.execution import make_inputs
        from kz_core.evaluate.timing import TimingSettings, time_forward

        tolerance = request.get("agree")
        return time_forward(
            forward,
            lambda seed: make_inputs(module, seed, self.device),
            request["seeds"],
            request["decoys"],
            self.device,
            TimingSettings(**request["settings"]),
            record_ops=record_ops,
            agree=Agreement(tolerance["table"], float(tolerance["atol"]), float(tolerance["rtol"])) if tolerance else None,
            unseen=request.get("unseen", []),
        )

    def varied_module(self, problem: dict[str, Any], overrides: dict[str, int]) -> Any:
        """A fresh copy of the problem's module with size constants rebound."""
        from kz_core.evaluate.execution import load_module

        self.counter += 1
        self.seal_shared_caches()
        folder = Path(tempfile.mkdtemp(prefix="variant-", dir=self.scratch_root))
        module = load_module(problem["code"], f"kz_problem_{problem['hash'][:12]}_v{self.counter}", str(folder / f"{problem['name']}.py"))
        for name, value in overrides.items():
            setattr(module, name, value)
        return module

    # -- reference role -----------------------------------------------------------------


#: Python frames allowed beyond the interpreter's limit in a worker, for kz's own.
KZ_FRAMES = 400


def serve(sock: socket.socket, preapplied_limits: bool = False, sandbox: dict[str, Any] | None = None) -> None:
    """Answer requests on ``sock`` until told to stop (the first one is ``init``).

    :param preapplied_limits: the zygote's supervisor already limited this process.
    :param sandbox: how the zygote placed this worker (its ``sandbox_spec``).
    """
    init = wire.recv_request(sock)
    # The frames kz's own code and its launch wrappers hold below a forward (about 150):
    # a forward that recurses 900 deep, which a plain script runs, ran out of Python's
    # default 1000 here (over-rejection probe 19). The C stack has room for these.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000) + KZ_FRAMES)
    try:
        if not preapplied_limits:
            apply_limits(init.get("limits", {}))
        worker = Worker(init, sandbox)
    except BaseException as exc:  # noqa: BLE001 - report why the worker cannot start
        wire.send_reply(sock, error_reply("start", exc))
        return
    wire.send_reply(sock, {"ok": True, "identity": worker.identity()})
    handlers = {
        "reference": worker.op_reference,
        "baseline": worker.op_baseline,
        "compile_baseline": worker.op_compile_baseline,
        "compile_baseline_fake": worker.op_compile_baseline_fake,
        "footprint": worker.op_footprint,
        "audit": worker.op_audit,
        "validate": worker.op_validate,
        "fuzz_reference": worker.op_fuzz_reference,
        "fuzz_trials": worker.op_fuzz_trials,
        "load": worker.op_load,
        "build": worker.op_build,
        "trials": worker.op_trials,
        "time": worker.op_time,
        "unload": worker.op_unload,
        "release": worker.op_release,
        "compare": worker.op_compare,
        "record": worker.op_record,
        "prepare": worker.op_prepare,
        "add_plans": worker.op_add_plans,
        "execute": worker.op_execute,
        "time_plan": worker.op_time_plan,
        "release_held": worker.op_release_held,
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
        on_gpu = worker.device.startswith("cuda")
        if on_gpu:
            from kz_core.evaluate.execution import release_shared_counters

            with contextlib.suppress(Exception):
                # The last reply's shared outputs have been compared: their counts go
                # back before anything drops them (execution.share_cuda_tensor).
                release_shared_counters()
            with contextlib.suppress(Exception):
                worker.torch.cuda.reset_peak_memory_stats()
        try:
            reply = handler(request) if handler else {"ok": False, "stage": "protocol", "message": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - raised outside the op's own handling (a process the candidate broke): this request's error
            reply = error_reply("run", exc)
        if on_gpu and isinstance(reply, dict):
            # What this request held on the GPU at most (diagnostics: the memory budget's
            # multiple, kz_core/evaluate/memory.py); a dead CUDA context reports nothing.
            with contextlib.suppress(Exception):
                reply["peak_bytes"] = int(worker.torch.cuda.max_memory_allocated())
        try:
            wire.send_reply(sock, reply)
        except (OSError, wire.WireError):
            return
        except Exception as exc:  # noqa: BLE001 - an output that cannot be encoded or copied to the host
            wire.send_reply(sock, error_reply("reply", exc))
        del reply
        if worker.role in ("reference", "executor"):
            try:
                worker.release_cached_memory()
            except Exception:  # noqa: BLE001 - a dead CUDA context: the parent replaces this worker
                pass


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
