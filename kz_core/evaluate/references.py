"""The reference side of an evaluation: reference outputs, baselines, on-device comparison.

All of it runs in *reference* workers, which never run candidate code. They run the
problem's code, which may be model-written (the Proposer's modules in co-evolution), so
they are forked from the evaluator's zygote under Landlock and seccomp like executors, and
each is bound to one problem: a worker that ran one problem's code never serves another. Reference outputs
are computed once per problem for the evaluator's secret seeds and kept (least recently
used first out) within a memory budget; baselines are timed once per problem, device and
torch version and cached in the user's cache folder; outputs too large to move are
compared on the GPU, where a reference worker copies them out of the candidate's memory.

Lock order, everywhere: a GPU memory reservation first, then the GPU lock, then a worker.
A thread never waits for the GPU lock while it holds a reference worker.
"""

from __future__ import annotations

import collections
import contextlib
import json
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs
from loguru import logger

from kz_core.evaluate.calls import call_worker, problem_payload
from kz_core.evaluate.contention import Contention
from kz_core.evaluate.journal import BaselineCache, result_key
from kz_core.evaluate.memory import FIRST_REFERENCE_SHARE, MemoryBudget, is_gpu_oom
from kz_core.evaluate.sandbox import WorkerPool
from kz_core.evaluate.timing import GRAPH_OUT_OF_MEMORY, INPUT_BYTES, UNSEEN_REPLAYS, TimingSettings
from kz_core.evaluate.variants import size_variations
from kz_core.model import Environment, Finding, Problem, RuntimeStats, Severity
from kz_core.serialization import from_json_dict


@attrs.frozen
class Seeds:
    """Secret seeds drawn when an evaluator starts: candidates cannot predict inputs."""

    init: int
    trials: tuple[int, ...]
    timing: tuple[int, ...]
    variant: int
    #: Inputs a CUDA graph is warmed up and captured on before the timing inputs are
    #: copied into its buffers (``kz_core.evaluate.timing``); no reference needed.
    decoys: tuple[int, ...]
    #: Inputs of calls timed after the others on a GPU, each set never seen by the
    #: candidate before (``kz_core.evaluate.timing``): their outputs are checked too.
    unseen: tuple[int, ...] = ()

    @classmethod
    def draw(cls, trials: int) -> Seeds:
        return cls(
            init=secrets.randbits(31),
            trials=tuple(secrets.randbits(62) for _ in range(trials)),
            timing=tuple(secrets.randbits(62) for _ in range(2)),
            variant=secrets.randbits(62),
            decoys=tuple(secrets.randbits(62) for _ in range(2)),
            unseen=cls.fresh_unseen(),
        )

    @staticmethod
    def fresh_unseen() -> tuple[int, ...]:
        """Secret seeds of unseen inputs for one timing (a second timing of a candidate draws
        its own). One checked call per unseen replay: a forward must compute nearly every
        call there to keep its time, so one secret call finds one that writes garbage."""
        return tuple(secrets.randbits(62) for _ in range(UNSEEN_REPLAYS))


def call_bytes(trial: dict[str, Any]) -> int:
    """The bytes of one reference call's inputs and outputs (a trial record's)."""
    return trial["input_bytes"] + sum(meta["nbytes"] for meta in trial["output_meta"])


@attrs.frozen
class ReferenceRecord:
    """Reference outputs per seed for one problem, or why the reference failed."""

    trials: dict[int, dict[str, Any]] = attrs.field(factory=dict)
    error: str = ""
    nbytes: int = 0
    #: ``{"overrides": {...}, "seed": s}`` for the size-variation trial, when one suits.
    variant: dict[str, Any] | None = None
    #: Outputs too large to move: compared on the GPU by a reference worker.
    on_device: bool = False

    @property
    def footprint_bytes(self) -> int:
        """The bytes of one call's inputs and outputs (the largest over the trials)."""
        return max((call_bytes(trial) for trial in self.trials.values()), default=0)


#: GPU memory the problem's own code may allocate, with torch's, while its ``compile``
#: baseline is compiled on fake tensors before the log names it (``_compile_on_fake_tensors``):
#: torch makes an allocation of its own there (a few bytes), a problem's tensor is larger.
PROBLEM_ALLOCATED_BYTES = 1 << 20


class SharedExclusiveLock:
    """Many shared holders or one exclusive holder; a waiting exclusive blocks new shared.

    The thread holding it exclusive may take it again, shared or exclusive, at no cost:
    a candidate's timing and its baselines' are one hold (``Evaluator._time``), so the
    shared holders drain once for both.

    :param contention: where waits and holds are recorded (as ``gpu shared`` and ``gpu
        exclusive``), when given; a take inside the exclusive holder's own is not.
    """

    def __init__(self, contention: Contention | None = None) -> None:
        self._condition = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting_exclusive = 0
        #: The thread holding the lock exclusive (only that thread sets or clears it).
        self._owner: int | None = None
        self._contention = contention

    def held_exclusive(self) -> bool:
        """Whether the calling thread holds the lock exclusive."""
        return self._owner == threading.get_ident()

    def shared(self) -> contextlib.AbstractContextManager[None]:
        if self.held_exclusive():
            return contextlib.nullcontext()
        return self._timed("gpu shared", self._hold_shared())

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        if self.held_exclusive():
            return contextlib.nullcontext()
        return self._timed("gpu exclusive", self._hold_exclusive())

    def _timed(self, name: str, lock: contextlib.AbstractContextManager[None]) -> contextlib.AbstractContextManager[None]:
        return self._contention.hold(name, lock) if self._contention is not None else lock

    def _wait_shared(self) -> None:
        """Wait, with the condition held, until a new shared holder may go: while anyone
        holds or waits for the lock exclusive, it may not (``benchmarks/gpu_lock_policies.py``
        compares this policy with others)."""
        while self._exclusive or self._waiting_exclusive:
            self._condition.wait()

    @contextlib.contextmanager
    def _hold_shared(self) -> Iterator[None]:
        with self._condition:
            self._wait_shared()
            self._shared += 1
        try:
            yield
        finally:
            with self._condition:
                self._shared -= 1
                self._condition.notify_all()

    @contextlib.contextmanager
    def _hold_exclusive(self) -> Iterator[None]:
        with self._condition:
            self._waiting_exclusive += 1
            while self._exclusive or self._shared:
                self._condition.wait()
            self._waiting_exclusive -= 1
            self._exclusive = True
            self._owner = threading.get_ident()
        try:
            yield
        finally:
            with self._condition:
                self._owner = None
                self._exclusive = False
                self._condition.notify_all()


class ReferenceService:
    """References, baselines and comparisons for one evaluator, through its reference pool."""

    def __init__(
        self,
        config: Any,
        device: str,
        pool: WorkerPool,
        gpu: SharedExclusiveLock,
        seeds: Seeds,
        timing: TimingSettings,
        environment: Callable[[], Environment],
        contention: Contention | None = None,
        memory: Callable[[], MemoryBudget] | None = None,
        alone: Callable[[], bool] | None = None,
    ):
        self.config = config
        self.device = device
        self.pool = pool
        self.gpu = gpu
        self.seeds = seeds
        self.timing = timing
        self.environment = environment
        self._records: collections.OrderedDict[str, ReferenceRecord] = collections.OrderedDict()
        self._bytes = 0
        self._locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._records_lock = threading.Lock()
        self._baselines: dict[tuple[str, str, str], RuntimeStats | None] = {}
        self._baseline_locks: dict[tuple[str, str, str], threading.Lock] = collections.defaultdict(threading.Lock)
        self._baseline_cache: BaselineCache | None = None
        #: Problems whose ``compile`` baseline was compiled ahead (:meth:`compile_ahead`),
        #: and the pid of the reference worker that holds what it compiled (None: failed).
        self._compiled_ahead: dict[str, int | None] = {}
        self._compile_ahead_locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self.contention = contention if contention is not None else Contention()
        #: The GPU's memory budget (``kz_core.evaluate.memory``), built on first use.
        self.memory = memory if memory is not None else (lambda: MemoryBudget(0))
        #: Whether the calling thread evaluates a candidate again after the GPU ran out
        #: of memory (its reference, if computed now, reserves the whole budget).
        self.alone = alone if alone is not None else (lambda: False)

    @contextlib.contextmanager
    def worker(self, problem: Problem, prefer: int | None = None) -> Iterator[Any]:
        """A reference worker bound to ``problem`` (``prefer``: the pid of the one to take
        when it is idle, ``WorkerPool.acquire``)."""
        with self.contention.hold("reference worker", self.pool.acquire(problem.content_hash, prefer=prefer)) as worker:
            yield worker

    def pinned(self, problem: Problem) -> contextlib.AbstractContextManager[None]:
        """Keep ``problem``'s reference worker while the block runs, unless no other worker
        can make room (``WorkerPool.pinned``)."""
        return self.pool.pinned(problem.content_hash)

    def close(self) -> None:
        self.pool.close()
        if self._baseline_cache is not None:
            self._baseline_cache.close()

    # -- reference outputs --------------------------------------------------------------

    def get(self, problem: Problem) -> ReferenceRecord:
        """The problem's reference record, computed on first use."""
        key = problem.content_hash
        with self._locks[key]:
            with self._records_lock:
                if key in self._records:
                    self._records.move_to_end(key)
                    return self._records[key]
            record = self._compute(problem)
            if is_gpu_oom(record.error):
                return record  # the GPU was full: not this problem's fault, so not kept
            with self._records_lock:
                self._records[key] = record
                self._bytes += record.nbytes
                limit = self.config.reference_cache_mb << 20
                while self._bytes > limit and len(self._records) > 1:
                    _, evicted = self._records.popitem(last=False)
                    self._bytes -= evicted.nbytes
            return record

    def _compute(self, problem: Problem) -> ReferenceRecord:
        request = {
            "op": "reference",
            "problem": problem_payload(problem),
            "init_seed": self.seeds.init,
            "seeds": list(self.seeds.trials + self.seeds.timing + (self.seeds.unseen if self.device != "cpu" else ())),
            "variations": size_variations(problem.code) if self.config.size_variation else [],
            "variant_seed": self.seeds.variant,
            "max_transfer_bytes": self.config.transfer_limit_mb << 20 if self.device != "cpu" else 1 << 62,
        }
        # GPU memory for it, taken before the GPU lock (the lock order of
        # kz_core.evaluate.memory): twice one call's footprint as found on torch's meta
        # device, else a fixed share of the budget.
        budget = self.memory()
        need = 0
        if budget.capacity and self.alone():
            need = budget.capacity
        elif budget.capacity:
            # On torch's meta device: nothing runs on the GPU, so the GPU lock is not taken
            # (and nothing is waited for while the worker is held).
            with self.worker(problem) as worker:
                probe, _ = call_worker(worker, {"op": "footprint", "problem": request["problem"], "init_seed": self.seeds.init}, 60, "footprint")
            found = probe.get("bytes") if probe else None
            need = 2 * found if type(found) is int and found >= 0 else int(budget.capacity * FIRST_REFERENCE_SHARE)
        with budget.reserve(need), self.gpu.shared(), self.worker(problem) as worker:
            reply, failure = call_worker(worker, request, self.config.run_timeout_s, "reference")
        if failure is not None or reply is None:
            return ReferenceRecord(error=(failure.message if failure else "no reply"))
        trials = {trial["seed"]: trial for trial in reply["trials"]}
        variant = None
        if reply.get("variant"):
            trials[self.seeds.variant] = reply["variant"]["trial"]
            variant = {"overrides": reply["variant"]["overrides"], "seed": self.seeds.variant}
        varying = _varying_value_input(reply["trials"])
        if varying:
            return ReferenceRecord(error=f"the problem is not supported: {varying}")
        for trial in trials.values():
            bad = [meta["type"] for meta in trial["output_meta"] if meta["type"] != "Tensor"]
            if bad:
                return ReferenceRecord(
                    error=f"the problem is not supported: its reference returned non-tensor outputs ({', '.join(bad)}); kz compares a tensor or a flat "
                    "tuple or list of tensors (a nested tuple must be flattened in the problem's forward)"
                )
        nbytes = sum(t.nbytes for trial in trials.values() for t in trial["outputs"] if t is not None)
        on_device = any(trial["on_device"] for trial in trials.values())
        return ReferenceRecord(trials=trials, nbytes=nbytes, variant=variant, on_device=on_device)

    # -- comparison on the GPU ----------------------------------------------------------

    def compare_on_device(
        self, problem: Problem, record: dict[str, Any], overrides: dict[str, int] | None, label: str, executor: bool = False
    ) -> dict[str, Any]:
        """Have a reference worker copy a candidate's shared GPU outputs and compare them
        (the caller holds the GPU lock shared, and the candidate keeps the outputs alive).

        :param executor: the outputs come from an executor, which runs nothing while it
            waits: they are compared where they lie, not copied first.
        """
        request = {
            "op": "compare",
            "problem": problem_payload(problem),
            "init_seed": self.seeds.init,
            "seed": record["seed"],
            "overrides": overrides,
            "shared": record.get("shared", []),
            "tolerance": self.config.tolerance,
            "atol": self.config.atol,
            "rtol": self.config.rtol,
            "label": label,
            "copy": not executor,
        }
        with self.worker(problem) as worker:
            reply, failure = call_worker(worker, request, self.config.run_timeout_s, "comparison")
        if failure is not None or reply is None:
            message = failure.message if failure else "no reply"
            finding = {"check": "reference_error", "message": f"the comparison failed: {message}", "severity": "error", "line": None}
            return {"findings": [finding], "max_abs_error": 0.0, "max_rel_error": 0.0}
        return reply

    # -- baselines ----------------------------------------------------------------------

    def _baseline_store(self) -> BaselineCache | None:
        if not self.config.cache:
            return None
        if self._baseline_cache is None:
            from kz_core.paths import cache_dir

            self._baseline_cache = BaselineCache(cache_dir(create=True) / "baselines.sqlite")
        return self._baseline_cache

    def compile_ahead(self, problem: Problem, reservation: contextlib.AbstractContextManager[Any]) -> None:
        """Have ``problem``'s reference worker compile its ``compile`` baseline with the GPU
        held shared (and ``reservation``, the memory a candidate of the problem reserves),
        once per problem, before a candidate's timing takes the GPU exclusive: timed
        there, ``torch.compile``'s first call compiled the model inside the exclusive hold
        (seconds to a minute per problem), while every other candidate's GPU work waited
        (``ReferenceOps.op_compile_baseline``). Nothing is done when the baseline is known,
        and a failure here changes nothing: the timing compiles it again and says why it
        fails. The caller must not hold the GPU lock: this takes it shared (after the
        reservation, before the reference worker, the lock order of this module)."""
        if "compile" not in self.config.baselines or self.device == "cpu":
            return
        key = (problem.content_hash, "compile", self.timing.method)
        with self._compile_ahead_locks[problem.content_hash]:
            if problem.content_hash in self._compiled_ahead or key in self._baselines:
                return
            self._compiled_ahead[problem.content_hash] = None
            store = self._baseline_store()
            if store is not None and store.get(self._baseline_cache_key(problem, "compile", self.timing)) is not None:
                return
            request = {"op": "compile_baseline", "problem": problem_payload(problem), "init_seed": self.seeds.init, "seed": self.seeds.decoys[0]}
            prefer = self._compile_on_fake_tensors(problem, request) if self.config.compile_ahead == "fake_first" else None
            with reservation, self.gpu.shared():
                if key in self._baselines:  # timed while this waited for the lock
                    return
                with self.worker(problem, prefer=prefer) as worker:
                    _, failure = call_worker(worker, request, self.config.compile_timeout_s, "compile baseline")
                    if failure is None:
                        self._compiled_ahead[problem.content_hash] = getattr(worker, "worker_pid", None)
            if failure is not None:
                logger.info("{}: the compile baseline could not be compiled ahead ({}); its timing compiles it", problem.name, failure.message)

    def _compile_on_fake_tensors(self, problem: Problem, request: dict[str, Any]) -> int | None:
        """With ``eval.compile_ahead=fake_first``: have ``problem``'s reference worker compile
        the ``compile`` baseline on fake tensors first (``op_compile_baseline_fake``), with
        no lock and no memory reservation held, since nothing runs on the GPU: inductor's
        and Triton's compiling, most of a first call's seconds, no longer holds the GPU
        shared, where every timing waits for it. Gives the pid of the worker that holds the
        compiled graphs (in its own cache folders), for the real first call to be made
        there; None when it failed (that call compiles, as before)."""
        with self.worker(problem) as worker:
            reply, failure = call_worker(worker, {**request, "op": "compile_baseline_fake"}, self.config.compile_timeout_s, "compile baseline on fake tensors")
            pid = getattr(worker, "worker_pid", None)
        if failure is not None or reply is None:
            logger.info("{}: the compile baseline could not be compiled on fake tensors ({}); its first call compiles it", problem.name, failure.message if failure else "no reply")
            return None
        if int(reply.get("problem_allocated_bytes") or 0) >= PROBLEM_ALLOCATED_BYTES:
            logger.warning(
                "{}: the problem's code allocated {:.1f} MiB of GPU memory while its compile baseline was compiled on fake tensors, with no GPU lock held "
                "(it left torch's fake mode); eval.compile_ahead=shared compiles with the GPU held shared",
                problem.name,
                int(reply["problem_allocated_bytes"]) / (1 << 20),
            )
        return pid

    def _baseline_cache_key(self, problem: Problem, mode: str, settings: TimingSettings) -> str:
        """The baseline cache's key of ``problem``'s ``mode`` baseline timed with ``settings``."""
        # With the graph's input bound: since every call reads a buffer of its own
        # (INPUT_BYTES), baselines timed with calls cycling over fewer are not reused.
        timing = json.dumps({**attrs.asdict(settings), "input_bytes": INPUT_BYTES}, sort_keys=True)
        environment = self.environment()
        return result_key(problem.content_hash, mode, environment.device_name, environment.torch, timing)

    def baseline(
        self, problem: Problem, mode: str, findings: list[Finding], settings: TimingSettings | None = None, alone: bool = False
    ) -> RuntimeStats | None:
        """The timed ``mode`` baseline (``eager``, ``compile``); a failure adds a warning.

        A baseline that ran the GPU out of memory (it failed, or its graph timing fell back
        to events) is kept, for every later candidate of the problem, only when timed
        ``alone``; otherwise its warning says so, for the caller to evaluate the candidate
        again with the GPU's memory to itself (``evaluator.ran_out_of_gpu_memory``).

        :param settings: how to time it (the evaluator's timing settings when None).
        :param alone: the caller holds the whole GPU memory budget.
        """
        settings = settings if settings is not None else self.timing
        key = (problem.content_hash, mode, settings.method)
        with self._baseline_locks[key]:
            if key in self._baselines:
                return self._baselines[key]
            cache_key = self._baseline_cache_key(problem, mode, settings)
            store = self._baseline_store()
            stats = store.get(cache_key) if store is not None else None
            if stats is None:
                request = {
                    "op": "baseline",
                    "problem": problem_payload(problem),
                    "init_seed": self.seeds.init,
                    "seeds": list(self.seeds.timing),
                    "decoys": list(self.seeds.decoys),
                    "mode": mode,
                    "settings": attrs.asdict(settings),
                }
                timeout = self.config.run_timeout_s + (self.config.compile_timeout_s if mode == "compile" else 0)
                # The compile baseline in the worker that compiled it ahead, when it is idle:
                # another bound to the problem compiles it again, in this hold.
                prefer = self._compiled_ahead.get(problem.content_hash) if mode == "compile" else None
                with self.gpu.exclusive(), self.worker(problem, prefer=prefer) as worker:
                    reply, failure = call_worker(worker, request, timeout, f"{mode} baseline")
                    if reply is not None and reply.get("retire"):
                        worker.kill()  # a failed graph capture left its random generator unusable
                if failure is not None or reply is None:
                    reason = failure.message if failure else "no reply"
                    findings.append(Finding("baseline", f"the {mode} baseline could not be timed: {reason}", Severity.WARNING))
                    logger.warning("{}: {} baseline failed: {}", problem.name, mode, reason)
                    if is_gpu_oom(reason) and not alone:
                        return None  # the neighbours' memory, perhaps: not kept
                else:
                    stats = from_json_dict(RuntimeStats, reply["stats"])
                    if GRAPH_OUT_OF_MEMORY in stats.note and not alone:
                        findings.append(Finding("baseline", f"the {mode} baseline was {stats.note}; not kept", Severity.WARNING))
                        return stats
                    if store is not None:
                        store.put(cache_key, stats)
            self._baselines[key] = stats
            return stats


def _varying_value_input(trials: list[dict[str, Any]]) -> str:
    """What is wrong with a problem whose ``get_inputs()`` gives a non-tensor input a value
    that changes with the seed (over-rejection probe 16: ``s = torch.rand(()).item()``),
    or "": a candidate's forward is replayed with the non-tensor values it was recorded
    with (a Python number reaches a kernel or an operator as a literal), so every honest
    candidate would be a silent ``mismatch``."""
    seen: list[Any] = []
    for trial in trials:
        values = trial.get("value_inputs")
        if not isinstance(values, list) or not all(v is None or isinstance(v, str) for v in values):
            return ""  # a reply of another version: nothing to tell
        seen.append(values)
    for index in range(min((len(values) for values in seen), default=0)):
        texts = list(dict.fromkeys(values[index] for values in seen))
        if len(texts) > 1 and None not in texts:
            return (
                f"get_inputs() gives input {index} a Python value that changes with the seed ({texts[0]} and {texts[1]}); kz replays a "
                "candidate's forward with the non-tensor values it was recorded with, so a value that varies must be a tensor, or fixed in the problem"
            )
    return ""

