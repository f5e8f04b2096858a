"""The evaluator: many candidates at once, sandboxed, judged against references.

For each candidate, in this order:

1. static checks (``static_checks`` hook) on its source, in this process; errors end it;
2. reference outputs for the problem, from a *reference* worker (candidate code never
   runs there), for secret seeds drawn when the evaluator was created; cached;
3. in a *candidate* worker: compile (``backend_compile``), construct ``ModelNew`` with
   the reference's seed, run the correctness trials (``backend_run``), each on fresh
   inputs, with launch counting, profiling of the first call, poisoned free memory, and
   checks of inputs, aliasing, flags, threads and streams;
4. here: judge the trials against the reference (``check_outputs`` hook and the runtime
   guards of ``judge.py``);
5. on a GPU, for correct candidates: time them while no other work runs on that GPU
   (an exclusive lock; correctness trials of other candidates hold it shared), check the
   timed calls' outputs, and compare with baselines timed in a reference worker.

Every candidate failure becomes an :class:`EvalResult`; only failures of the evaluator
itself (a worker that cannot start, a missing GPU) raise :class:`EvaluatorError`.
Results are journaled when a journal is given. This module runs no candidate code.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs
from loguru import logger

from kz_core.config import ConfigError, EvalConfig, check_section, to_container
from kz_core.errors import KzError
from kz_core.evaluate.calls import call_worker, problem_payload
from kz_core.evaluate.builds import COMPILE_TIMEOUT_ENV, FOLDER as BUILDS_FOLDER, SharedBuilds, publish, shared_key, validate_deferred
from kz_core.evaluate.contention import Contention
from kz_core.evaluate.journal import Journal, result_key
from kz_core.evaluate.memory import MemoryBudget, budget_bytes, is_gpu_oom
from kz_core.evaluate.plans import plan_compute_ops, plan_drift
from kz_core.evaluate.replies import ReplyError, validate_execution, validate_load, validate_timed, validate_trials
from kz_core.evaluate.judge import (
    INFRASTRUCTURE_CHECKS,
    decide_verdict,
    judge_timed_outputs,
    judge_trials,
    judge_unseen,
    peak_bandwidth_gbps,
    refused_unverified,
    speed_of_light_finding,
    summary_message,
)
from kz_core.evaluate.references import ReferenceRecord, ReferenceService, Seeds, SharedExclusiveLock, call_bytes
from kz_core.evaluate import wire
from kz_core.evaluate.sandbox import SHARED_LIMIT_ENDED, WorkerPool, WorkerProcess, WorkerStartError, executor_caches, settings_from_config, start_zygote
from kz_core.evaluate.timing import GRAPH_CLOCK, GRAPH_OUT_OF_MEMORY, TimingSettings
from kz_core.model import Candidate, CheckResult, EvalResult, Environment, Finding, Problem, RuntimeStats, Severity, StageTimings, Verdict
from kz_core.paths import remove_tree, scratch_root as new_scratch_root
from kz_core.serialization import from_json_dict

#: Settings that never change a verdict, left out of journal keys.
_KEY_EXCLUDED = {
    "workers",
    "in_flight",
    "reference_workers",
    "reference_spares",
    "cache",
    "scratch_dir",
    "reference_cache_mb",
    "large_problem_mb",
    "reservation_footprints",
    "reservation_overtakes",
    "reservation_set_aside",
    "compile_ahead",
    "backend",
    "device",
    "devices",
    "engine",
    "ray_address",
    "ray_actors",
}
#: Seconds a recording's gap calls (the secret number of calls between its two recorded
#: ones) may take at most (``candidate_ops.gap_calls``).
RECORD_GAP_S = 0.1
#: Verdicts after which a candidate worker is replaced rather than reused.
_RETIRE_AFTER = {Verdict.REJECTED, Verdict.RUNTIME_ERROR, Verdict.TIMEOUT}


class _Unreplayable(Exception):
    """A candidate of a backend with ``unverified_fallback`` whose forward could not be
    recorded as a plan: it is evaluated in its own process instead (the message says why)."""

#: Problems whose candidates :meth:`Evaluator.schedule` interleaves.
PROBLEMS_TOGETHER = 2
#: The last attempt of a candidate that ran out of GPU memory: with the GPU to itself.
LAST_ALONE = 2
#: Once a candidate of a problem ran out of memory with the GPU's memory to itself, the
#: problem's next this many attempts (first attempts, or retries of candidates already in
#: flight) go straight to the last (a sweep's other seven; a GRPO group's); then it learns again.
ALONE_AFTER = 7


class EvaluatorError(KzError, RuntimeError):
    """The evaluator itself cannot work (no GPU, workers that cannot start); says what to do."""


def resolve_device(spec: str) -> str:
    """``cpu`` or ``cuda:N`` for a device setting, checking that the device exists."""
    spec = spec.strip().lower()
    if spec in ("", "auto"):
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if spec == "cpu":
        return "cpu"
    if spec == "cuda":
        spec = "cuda:0"
    if spec.startswith("cuda:") and spec[5:].isdigit():
        import torch

        if not torch.cuda.is_available():
            raise EvaluatorError(f"device {spec!r} was asked for, but torch sees no CUDA GPU here: use --device cpu (Triton runs under its interpreter)")
        if int(spec[5:]) >= torch.cuda.device_count():
            raise EvaluatorError(f"device {spec!r} does not exist: this machine has {torch.cuda.device_count()} GPU(s)")
        return spec
    raise EvaluatorError(f"unknown device {spec!r}: use auto, cpu, cuda or cuda:N")


def resolve_devices(config: Any) -> list[str]:
    """The devices an evaluator spreads candidates over: ``eval.devices`` when set (a
    device may repeat only on a CPU, for tests of the spreading), else every visible GPU
    for ``cuda``, else the one ``eval.device`` names."""
    listed = [str(d) for d in (getattr(config, "devices", None) or [])]
    if listed:
        devices = [resolve_device(d) for d in listed]
        repeated = sorted({d for d in devices if d != "cpu" and devices.count(d) > 1})
        if repeated:
            raise EvaluatorError(f"eval.devices names {', '.join(repeated)} more than once: list each GPU once")
        return devices
    if str(config.device).strip().lower() == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise EvaluatorError("device 'cuda' was asked for, but torch sees no CUDA GPU here: use --device cpu (Triton runs under its interpreter)")
        return [f"cuda:{index}" for index in range(torch.cuda.device_count())]
    return [resolve_device(config.device)]


def _on_device(config: Any, device: str, **more: Any) -> Any:
    """A copy of the ``eval`` section for one device (a lane of a multi-device evaluator)."""
    if dataclasses.is_dataclass(config):
        return dataclasses.replace(config, device=device, devices=[], **more)
    from omegaconf import OmegaConf

    return OmegaConf.merge(config, {"device": device, "devices": [], **more})


def reply_memory_bytes(config: EvalConfig) -> int | None:
    """The budget for large replies in flight in the parent, bytes (``eval.reply_memory_gb``;
    None: the default, a quarter of the machine's memory)."""
    gigabytes = float(config.reply_memory_gb)
    if gigabytes == 0:
        return None
    return 1 << 62 if gigabytes < 0 else int(gigabytes * (1 << 30))


def executor_slots(workers: int, in_flight: int, spares: int = 0) -> int:
    """The executor pool's size: as many as candidate workers or ``eval.in_flight`` when
    larger, and ``spares`` (``eval.executor_spares``) more, started ahead. Each candidate
    in flight holds an executor from its start, used once: with 8 workers the ninth
    candidate in flight waits for one, and on a GPU for a start of about 2 s (647 s of
    executor waits in a 470 s sweep on an H100, fifty-first session). Spares end those
    waits, but measured there they did not make the sweep faster (``kz_core.config``)."""
    return max(workers, in_flight) + spares


def _default_workers(device: str) -> int:
    if device == "cpu":
        return max(1, min(8, os.cpu_count() or 1))
    return 4


class Evaluator:
    """Evaluate candidates for a set of problems; a context manager that owns worker pools.

    On several devices (``eval.devices``, or ``eval.device=cuda`` with several GPUs) it
    spreads candidates over *lanes*, one evaluator per device with its own workers,
    references, memory budget and timing lock: a problem's candidates go to the lane that
    has its reference unless that lane is full and another is not.

    :param problems: the problems candidates may answer (by name).
    :param config: the ``eval`` config section (defaults when None).
    :param journal: where finished results are stored and found again (optional).
    """

    def __init__(self, problems: Iterable[Problem], config: EvalConfig | Any | None = None, *, journal: Journal | None = None, _contention: Contention | None = None):
        from kz_core.plugins import get_plugin_manager

        self.config = config if config is not None else EvalConfig()
        # The rules every config load applies (kz_core.config.RULES), for a section built by hand.
        check_section("eval", self.config)
        self.problems = {p.name: p for p in problems}
        settings = to_container(self.config)
        self._config_key = json.dumps({k: v for k, v in settings.items() if k not in _KEY_EXCLUDED}, sort_keys=True)
        ray_engine = str(getattr(self.config, "engine", "local")) == "ray"
        devices = [] if ray_engine else resolve_devices(self.config)
        from kz_core.plugins import backends

        self.pm = get_plugin_manager()
        self.backends = backends()
        self.journal = journal
        #: Results read back from the journal instead of evaluated (``evaluate_one``).
        self.reused = 0
        self._counts_lock = threading.Lock()
        self._closed = False
        #: Waits and holds per lock (``Contention.snapshot()``): where candidates queue.
        self.contention = _contention if _contention is not None else Contention()
        #: One evaluator per device when there are several (empty: this one is the lane).
        self.lanes: list[Any] = []
        self._multi = ray_engine or len(devices) > 1
        self._ray_started = False
        if self._multi:
            self._route_lock = threading.Lock()
            self._homes: dict[str, Any] = {}
            self._in_flight: dict[int, int] = {}
            try:
                if ray_engine:  # one lane per actor of a Ray cluster (kz_core/evaluate/ray_engine.py)
                    from kz_core.evaluate.ray_engine import start_lanes

                    self.lanes, self._ray_started = start_lanes(self.problems, self.config)
                for device in devices:
                    lane = Evaluator(self.problems.values(), _on_device(self.config, device), _contention=self.contention)
                    lane.problems = self.problems  # one dict: problems added later reach every lane
                    self.lanes.append(lane)
            except BaseException:
                self.close()
                raise
            self.device = ",".join(lane.device for lane in self.lanes)
            self._in_flight = {id(lane): 0 for lane in self.lanes}
            #: Candidates each lane evaluated (``evaluate_one``), in the order of ``lanes``.
            self.lane_counts = [0] * len(self.lanes)
            return
        self.device = devices[0]
        self.seeds = Seeds.draw(self.config.trials)
        scratch_root = new_scratch_root("eval", self.config.scratch_dir)
        wire.configure_reply_memory(reply_memory_bytes(self.config), self.config.scratch_dir or None)
        workers = self.config.workers or _default_workers(self.device)
        from kz_core.paths import cache_dir

        shared = executor_caches()  # the backends' kernel caches that executors write
        sandboxed = settings_from_config(
            self.config,
            self.device,
            scratch_root,
            # What ends a compiling worker: backends that build (cuda_inline) stop their own
            # builds before it, to report them as builds past their limit.
            extra_env=((COMPILE_TIMEOUT_ENV, f"{self.config.compile_timeout_s:g}"),),
            cpu_budget_s=self.config.cpu_time_limit_s,
            executor_write_paths=tuple(str(cache_dir(create=True) / name) for name in shared),
            # Candidate workers read (never write) what executors compiled and what kz's
            # builder built for them (kz_core/evaluate/builds.py): a build by its key (the
            # hash of its sources), with no listing of the folder, so that no candidate can
            # find, and load as its own, a build of a sibling's sources.
            read_paths=tuple(str(cache_dir() / name) for name in shared),
            lookup_paths=(str(cache_dir() / BUILDS_FOLDER),),
        )
        for name in (*shared, BUILDS_FOLDER):
            (cache_dir() / name).mkdir(parents=True, exist_ok=True)
        self._shared_builds = SharedBuilds(cache_dir() / BUILDS_FOLDER)
        self._builder_pool: WorkerPool | None = None
        self._builds_lock = threading.Lock()
        try:
            self._zygote = start_zygote(self.device, sandboxed, self.config.isolation_off)
        except (WorkerStartError, ConfigError) as exc:
            raise EvaluatorError(str(exc)) from exc
        # A candidate's reply is its plans and the module's tensors (or, for a backend
        # without trusted kernels, outputs no larger than the transfer limit): bounded.
        reply_bytes = (2 * int(self.config.plan_constant_mb) + int(self.config.transfer_limit_mb) + 64) << 20
        if sandboxed.group_memory_bytes and "memory" in self._zygote.support.cgroups:
            # A worker cannot have held more than its group's memory to reply with: a reply
            # past it is a worker making the parent hold what it may not (round 27). So for
            # executors and reference workers too, which run a problem's code.
            reply_bytes = min(reply_bytes, sandboxed.group_memory_bytes)
            sandboxed = attrs.evolve(sandboxed, max_reply_bytes=min(sandboxed.max_reply_bytes, sandboxed.group_memory_bytes))
        candidate_settings = attrs.evolve(sandboxed, max_reply_bytes=reply_bytes)
        self._candidate_pool = WorkerPool(self.device, "candidate", workers, candidate_settings, zygote=self._zygote)
        executors = executor_slots(workers, int(self.config.in_flight), int(self.config.executor_spares))
        self._executor_pool = WorkerPool(self.device, "executor", executors, sandboxed, zygote=self._zygote)
        self._gpu = SharedExclusiveLock(self.contention)
        # Held shared by every candidate's evaluation, exclusive by one evaluated again
        # after the workers together went over their memory limit: it runs alone.
        self._host = SharedExclusiveLock()
        self._memory: MemoryBudget | None = None
        self._memory_lock = threading.Lock()
        # Candidates in flight of problems that reserve GPU memory (_set_aside_for_in_flight),
        # and whether this thread's is one.
        self._large_in_flight = 0
        self._slot = threading.local()
        # Set in a thread evaluating a candidate again after the GPU ran out of memory:
        # its reservations take the whole budget.
        self._alone = threading.local()
        #: Problems whose next attempts go straight to the last, with the GPU to
        #: themselves, and how many more do (:data:`ALONE_AFTER`, :meth:`_alone_next`).
        self._alone_problems: dict[str, int] = {}
        self._timing = TimingSettings(
            warmup_ms=self.config.warmup_ms,
            min_trials=self.config.min_trials if self.device != "cpu" else self.config.cpu_timing_trials,
            max_trials=self.config.max_trials if self.device != "cpu" else self.config.cpu_timing_trials,
            budget_ms=self.config.time_budget_ms,
            target_relative_iqr=self.config.target_relative_iqr,
            method=self.config.timing_method,
            replay_ms=self.config.graph_replay_ms,
            max_calls_per_replay=self.config.graph_max_calls,
        )
        # Reference workers run the problem's code (the Proposer's, in co-evolution): forked
        # and confined like executors, kept between calls but bound to one problem each.
        reference_settings = attrs.evolve(sandboxed, cpu_budget_s=0)
        # By default twice the candidate workers on a GPU: each candidate in flight keeps its
        # problem's worker (on the H200, level 1: 71 reference worker starts for 72
        # candidates with 16, 161 for 71 with 8; 15.3 against 15.0 candidates/min).
        reference_count = self.config.reference_workers or (workers if self.device == "cpu" else 2 * workers)
        reference_pool = WorkerPool(
            self.device, "reference", reference_count, reference_settings, zygote=self._zygote, single_use=False, spares=int(self.config.reference_spares)
        )
        for pool in (self._candidate_pool, self._executor_pool, reference_pool):
            pool.contention = self.contention
        self.references = ReferenceService(
            self.config,
            self.device,
            reference_pool,
            self._gpu,
            self.seeds,
            self._timing,
            self._environment,
            contention=self.contention,
            memory=self.memory_budget,
            alone=self._running_alone,
        )

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker (and their children); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._multi:
            try:
                for lane in self.lanes:
                    lane.close()
            finally:
                if self._ray_started:
                    from kz_core.evaluate.ray_engine import shutdown

                    shutdown(True)
            return
        try:
            self._candidate_pool.close()
            self._executor_pool.close()
            if self._builder_pool is not None:
                self._builder_pool.close()
        finally:
            try:
                self.references.close()
            finally:
                self._zygote.close()
        remove_tree(self._candidate_pool.settings.scratch_root)  # candidates wrote there: shutil.rmtree raised on a deep tree

    def warm_up(self) -> None:
        """Start the workers now rather than on the first candidate."""
        for lane in self.lanes:
            lane.warm_up()
        if self.lanes:
            return
        try:
            self.references.pool.warm_up()
            self._candidate_pool.warm_up()
            self._executor_pool.warm_up()
        except WorkerStartError as exc:
            raise EvaluatorError(str(exc)) from exc

    @property
    def isolation(self) -> Any:
        """The sandbox's mechanisms in use (``kz_core.evaluate.isolation.Support``)."""
        return self.lanes[0].isolation if self.lanes else self._zygote.support

    def __getattr__(self, name: str) -> Any:
        # A multi-device evaluator answers for its first lane what only a lane has (its
        # seeds, references, pools), as a single-device one would.
        lanes = self.__dict__.get("lanes")
        if lanes:
            return getattr(lanes[0], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def lane_for(self, problem: str) -> Evaluator:
        """The single-device evaluator that serves ``problem`` now (this one, when it has
        no lanes): a problem's lane keeps its reference; a full lane hands its next
        candidate to the least loaded one. Count the candidate in with ``_in_lane``."""
        if not self.lanes:
            return self
        with self._route_lock:

            def load(lane: Any) -> float:
                return self._in_flight[id(lane)] / max(1, lane.workers)

            alive = [lane for lane in self.lanes if not getattr(lane, "lost", False)]
            if not alive:
                raise EvaluatorError("every evaluator lane was lost (the Ray cluster's nodes died): finished results are kept in the journal")
            least = min(alive, key=load)
            home = self._homes.get(problem)
            if home is None or getattr(home, "lost", False):
                home = self._homes[problem] = least
            return home if load(home) < 1 or load(least) >= 1 else least

    @contextlib.contextmanager
    def _in_lane(self, lane: Evaluator) -> Iterator[None]:
        with self._route_lock:
            self._in_flight[id(lane)] += 1
            self.lane_counts[self.lanes.index(lane)] += 1
        try:
            yield
        finally:
            with self._route_lock:
                self._in_flight[id(lane)] -= 1

    def memory_budget(self) -> MemoryBudget:
        """The GPU's memory budget (``kz_core.evaluate.memory``; none on a CPU), sized on
        first use from the device's memory as a worker reports it (the first lane's, on
        several devices)."""
        if self.lanes:
            return self.lanes[0].memory_budget()
        with self._memory_lock:
            if self._memory is None:
                capacity = unreserved = 0
                if self.device != "cpu":
                    pools = (self.references.pool, self._candidate_pool, self._executor_pool)
                    identity = next((pool.identity for pool in pools if pool.identity), None)
                    if identity is None:
                        self.references.pool.warm_up(1)
                        identity = self.references.pool.identity or {}
                    processes = sum(pool.size for pool in pools)
                    # Calls below eval.large_problem_mb reserve nothing: each worker may have
                    # a candidate's worth of them on the GPU without asking.
                    unreserved = self._candidate_pool.size * self._set_aside_share()
                    # The memory free when the first worker started (another process, such as
                    # kz train's policy on the same GPU, may hold some), else the total.
                    total = int(identity.get("memory_free_bytes") or identity.get("memory_bytes", 0))
                    capacity = budget_bytes(total, processes) if total else 0
                self._memory = MemoryBudget(capacity, self.contention, overtakes=int(self.config.reservation_overtakes), set_aside=unreserved)
                self._set_aside_for_in_flight(self._memory)
            return self._memory

    def _set_aside_for_in_flight(self, budget: MemoryBudget) -> None:
        """With ``eval.reservation_set_aside=in_flight``: the GPU memory set aside for the
        candidates that reserve nothing is one share for each candidate in flight not
        known to be of a large problem (those reserve what they use), at most one per
        candidate worker, as with ``workers``. The executors, one per candidate in flight,
        bound how many may be in flight. Called with ``_memory_lock`` held."""
        if self.config.reservation_set_aside != "in_flight" or not budget.capacity:
            return
        workers, slots = self._candidate_pool.size, self._executor_pool.size - int(self.config.executor_spares)
        budget.set_aside(max(0, min(workers, slots - self._large_in_flight)) * self._set_aside_share())

    def _set_aside_share(self) -> int:
        """The GPU memory set aside for one candidate worker's candidates that reserve
        nothing: ``eval.reservation_footprints`` footprints of ``eval.large_problem_mb``."""
        return int(self.config.reservation_footprints * (int(self.config.large_problem_mb) << 20))

    def _is_large(self, reference: ReferenceRecord) -> bool:
        """Whether a candidate of this problem reserves GPU memory (:meth:`_reservation`):
        one call's inputs and outputs above ``eval.large_problem_mb``."""
        return reference.footprint_bytes > self.config.large_problem_mb << 20

    def _note_large(self, reference: ReferenceRecord) -> None:
        """A candidate in flight, in this thread, of a problem that reserves GPU memory
        (:meth:`_reservation`): the set-aside shrinks until :meth:`_evaluate` ends."""
        if self.device == "cpu" or self.config.reservation_set_aside != "in_flight" or getattr(self._slot, "large", False) or not self._is_large(reference):
            return
        budget = self.memory_budget()
        with self._memory_lock:
            self._large_in_flight += 1
            self._slot.large = True
            self._set_aside_for_in_flight(budget)

    def _running_alone(self) -> bool:
        return self._alone_level() > 0

    def _alone_level(self) -> int:
        """0: a first attempt; 1: again with the whole memory budget; 2: again with the
        GPU to itself (:meth:`_alone_turn`)."""
        return int(getattr(self._alone, "on", 0))

    @contextlib.contextmanager
    def _alone_turn(self) -> Iterator[int]:
        """The GPU's memory for a candidate evaluated again after it ran out: the whole
        budget; on the last attempt also the GPU lock exclusive (no other candidate's work
        beside it, not even a small problem's, which reserves nothing) and every idle
        worker ended. On an 80 GB H100 the budget alone was not enough for honest copies
        of KernelBench's ``38_L1Norm_``, ``39_L2Norm_`` (8 GiB a tensor, 57 GiB held while
        timed) and ``45_Average_Pooling_2D``: 32 workers' CUDA contexts held about 19 GB
        of the card. Lock order as everywhere: the reservation, then the GPU lock; the
        lock is the thread's own, so what it takes inside costs nothing."""
        budget = self.memory_budget()
        with budget.reserve(budget.capacity) as held:
            waited_for = getattr(self._alone, "problem", None)
            self._alone.problem = None  # asked once per attempt, at its first turn
            if self._alone_level() == 1 and waited_for is not None and self._alone_next(waited_for):
                # While this second attempt waited for the GPU's memory, another candidate
                # of its problem ran out with it: the last attempt's way, not a second
                # attempt that runs out too (a sweep's candidates of one problem queue here
                # together, one after another).
                self._alone.on = LAST_ALONE
            if self._alone_level() < 2:
                yield held
                return
            with self._gpu.exclusive():
                pools = (self._candidate_pool, self._executor_pool, self.references.pool)
                ended = sum(pool.shed_idle() for pool in pools)
                logger.info("alone on {}: {} idle workers ended to free their GPU memory", self.device, ended)
                yield held

    def _reservation(self, reference: ReferenceRecord) -> Any:
        """The memory a candidate of this problem reserves while it is on the GPU: none
        below ``eval.large_problem_mb`` per call (and on a CPU); all of it when the
        candidate runs again after the GPU ran out of memory."""
        if self.device == "cpu":
            return contextlib.nullcontext(0)
        if self._running_alone():
            return self._alone_turn()
        if not self._is_large(reference):
            return contextlib.nullcontext(0)
        return self.memory_budget().reserve(int(self.config.reservation_footprints * reference.footprint_bytes))

    @property
    def workers(self) -> int:
        """Candidate workers, on every device together."""
        return sum(lane.workers for lane in self.lanes) if self.lanes else self._candidate_pool.size

    @property
    def in_flight(self) -> int:
        """Candidates :meth:`evaluate` runs at once, on every device together:
        ``eval.in_flight`` per device, else one more than the candidate workers."""
        per_device = int(self.config.in_flight)
        return per_device * max(1, len(self.lanes)) if per_device else self.workers + 1

    # -- public API ---------------------------------------------------------------------

    def evaluate(self, candidates: Sequence[Candidate], progress: Callable[[EvalResult], None] | None = None) -> list[EvalResult]:
        """Evaluate ``candidates`` concurrently; one result per candidate, in order.

        :param progress: called with each result as it finishes (from a worker thread).
        :raises EvaluatorError: only when the evaluator itself cannot work.
        """
        candidates = list(candidates)
        results: list[EvalResult | None] = [None] * len(candidates)
        order = self.schedule(candidates)
        threads = self.in_flight
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kz-eval") as executor:
            futures = {executor.submit(self.evaluate_one, candidates[i]): i for i in order}
            try:
                for future in concurrent.futures.as_completed(futures):
                    index = futures[future]
                    results[index] = future.result()
                    if progress is not None:
                        progress(results[index])  # type: ignore[arg-type]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return results  # type: ignore[return-value]

    def schedule(self, candidates: Sequence[Candidate], together: int | None = None) -> list[int]:
        """The order in which :meth:`evaluate` starts ``candidates`` (their indices).

        Problems in the order of their content hashes, not their names: problems of one
        family are named alike (KernelBench's activations, each moving 12.8 GB a call),
        and side by side they all wait for the same GPU memory. On a GPU, problems are
        taken ``together`` (:data:`PROBLEMS_TOGETHER`) at a time, their candidates
        alternating: each problem's reference is still computed once and its worker
        kept, but the candidates in flight are not all of one problem (a sweep's eight of
        one large problem waited for its GPU memory one after another: 1,229 s of waits
        in a 452 s run on an H100; not yet measured since). On a CPU, where nothing waits
        for memory, a problem's candidates stay together (alternating took 6 % longer
        there on the example problems).
        """
        if together is None:
            together = PROBLEMS_TOGETHER if self.device != "cpu" else 1
        groups: dict[str, list[int]] = {}
        for index, candidate in enumerate(candidates):
            groups.setdefault(candidate.problem, []).append(index)

        def rank(name: str) -> tuple[str, str]:
            problem = self.problems.get(name)
            return (problem.content_hash if problem is not None else "", name)

        names = sorted(groups, key=rank)
        order: list[int] = []
        for start in range(0, len(names), together):
            taken = [groups[name] for name in names[start : start + together]]
            for turn in range(max(len(group) for group in taken)):
                order += [group[turn] for group in taken if turn < len(group)]
        return order

    async def evaluate_async(self, candidates: Sequence[Candidate], progress: Callable[[EvalResult], None] | None = None) -> list[EvalResult]:
        """:meth:`evaluate` for async code: runs in a thread, so the event loop stays free."""
        return await asyncio.to_thread(self.evaluate, candidates, progress)

    def journal_key(self, candidate: Candidate) -> str:
        if self.lanes and isinstance(self.lanes[0], Evaluator):  # the same key on every lane
            return self.lanes[0].journal_key(candidate)
        if self.lanes:  # Ray actors: the same formula with their device and torch
            problem = self.problems.get(candidate.problem)
            lane = self.lanes[0]
            return result_key(problem.content_hash if problem else "?", candidate.content_hash, candidate.backend, lane.actor_device, lane.torch, self._config_key)
        import torch

        problem = self.problems.get(candidate.problem)
        return result_key(
            problem.content_hash if problem else "?",
            candidate.content_hash,
            candidate.backend,
            self.device,
            torch.__version__,
            self._config_key,
        )

    def evaluate_one(self, candidate: Candidate) -> EvalResult:
        """Evaluate one candidate (reusing the journal's result when there is one)."""
        key = self.journal_key(candidate) if self.journal is not None else ""
        if self.journal is not None and self.config.cache:
            cached = self.journal.get(key)
            if cached is not None:
                with self._counts_lock:
                    self.reused += 1
                return attrs.evolve(cached, sample_id=candidate.sample_id)
        if self.lanes:
            from kz_core.evaluate.ray_engine import RayLaneLost

            while True:
                lane = self.lane_for(candidate.problem)
                try:
                    with self._in_lane(lane):
                        result = lane.evaluate_one(candidate)  # the lane has no journal: kept here
                    break
                except RayLaneLost as exc:  # its node died: this candidate goes to another lane
                    logger.warning("evaluator lane {} was lost ({}); {}/{} goes to another", lane.device, exc, candidate.problem, candidate.sample_id)
            if self.journal is not None and not any(f.check in INFRASTRUCTURE_CHECKS for f in result.findings):
                self.journal.put(key, result)
            return result
        with self._host.shared():
            # A problem one of whose candidates ran out of GPU memory with the GPU's memory
            # to itself: the others start with the GPU to themselves, not with two attempts
            # that run out again.
            start = LAST_ALONE if self._alone_next(candidate.problem) else 0
            result = self._guarded_at(candidate, start)
            if start:
                why = f"evaluated with the GPU to itself from its first attempt: an earlier candidate of {candidate.problem} ran out of GPU memory until it had it"
                result = attrs.evolve(result, findings=result.findings + (Finding("gpu_memory", why, Severity.INFO),))
            # Other candidates' memory, or this one's own? Once more with the whole GPU
            # memory budget, and if that runs out too, a last time with the GPU to itself:
            # an honest kernel is never failed for what its neighbours held, and one that
            # runs out of memory alone is failed as before.
            level, attempt = start, 1
            while level < LAST_ALONE and ran_out_of_gpu_memory(result):
                if level == 0 and self._alone_next(candidate.problem):
                    # Since this one started, another candidate of its problem ran out of
                    # memory with the GPU's memory to itself: straight to the last attempt
                    # (a sweep's candidates of one problem run out together).
                    level, why = LAST_ALONE, (
                        f"evaluated again with the GPU to itself: the first attempt ran out of GPU memory, and another candidate of "
                        f"{candidate.problem} ran out with the GPU's memory to itself"
                    )
                elif level == 0:
                    level, why = 1, "evaluated again with the GPU's memory to itself: the first attempt ran out of GPU memory"
                else:
                    level, why = LAST_ALONE, (
                        "evaluated a third time with the GPU to itself (no other candidate's work beside it, idle workers ended): "
                        "the second attempt ran out of GPU memory too"
                    )
                    with self._counts_lock:  # the evidence: the GPU's memory to itself was not enough
                        self._alone_problems[candidate.problem] = ALONE_AFTER
                attempt += 1
                logger.info("{}/{} ran out of GPU memory; evaluating it again alone (attempt {})", candidate.problem, candidate.sample_id, attempt)
                result = self._guarded_at(candidate, level)
                if self._alone.reached > level:
                    level, why = self._alone.reached, (
                        f"evaluated again with the GPU to itself: the first attempt ran out of GPU memory, and while it waited for the GPU's memory "
                        f"another candidate of {candidate.problem} ran out with the GPU's memory to itself"
                    )
                result = attrs.evolve(result, findings=result.findings + (Finding("gpu_memory", why, Severity.INFO),))
        if ended_for_workers_memory(result):
            # The kernel chose this candidate's worker when all the workers together went
            # over their limit: it held among the most, but its neighbours' memory may have
            # put the workers over. Once more, alone: every other candidate in flight ends
            # first and none starts beside it. One that goes over alone is failed for it.
            logger.info("{}/{} was ended for the workers' common memory limit; evaluating it again alone", candidate.problem, candidate.sample_id)
            with self._host.exclusive():
                result = self._guarded(candidate)
            why = "evaluated again alone: the first attempt's worker was ended when kz's workers together went over eval.workers_memory_gb"
            result = attrs.evolve(result, findings=result.findings + (Finding("host_memory", why, Severity.INFO),))
        if self.journal is not None and not any(f.check in INFRASTRUCTURE_CHECKS for f in result.findings):
            self.journal.put(key, result)
        return result

    def _alone_next(self, problem: str) -> bool:
        """Whether the problem's next attempt starts with the GPU to itself (a candidate of
        it ran out of memory with the GPU's memory to itself, at most ``ALONE_AFTER``
        attempts ago): takes one of those attempts."""
        with self._counts_lock:
            left = self._alone_problems.get(problem, 0)
            if left:
                self._alone_problems[problem] = left - 1
            return bool(left)

    def _guarded_at(self, candidate: Candidate, level: int) -> EvalResult:
        """:meth:`_guarded` at an attempt's level of being alone (:meth:`_alone_level`)."""
        self._alone.on, self._alone.problem = level, candidate.problem if level == 1 else None
        try:
            return self._guarded(candidate)
        finally:
            self._alone.reached = self._alone.on  # LAST_ALONE where _alone_turn raised it
            self._alone.on, self._alone.problem = 0, None

    def _guarded(self, candidate: Candidate) -> EvalResult:
        """:meth:`_evaluate`, whose unexpected failure is this candidate's result alone
        (``not_run``, never journaled, so a re-run evaluates it again) rather than the end
        of the batch: red-team round 26b ended whole batches, every honest neighbour's
        result lost, through failures nobody had foreseen (a reply that broke the decoder,
        a folder tree too deep to remove). The evaluator's own failures still end it."""
        started = time.perf_counter()
        try:
            return self._evaluate(candidate)
        except (EvaluatorError, KeyboardInterrupt, SystemExit):
            raise
        except WorkerStartError as exc:  # a reference worker's: the machine's, not kz's bug
            message = (
                f"a sandboxed worker could not start on this machine ({str(exc)[:500]}); not the candidate's fault, so not "
                "journaled. `kz plugins` shows the sandbox's mechanisms here; eval.isolation_off=[...] turns off one that fails"
            )
            return self._finish(candidate, self.problems.get(candidate.problem), [Finding("not_run", message)], started)
        except Exception as exc:  # noqa: BLE001 - one candidate's failure, whatever it is
            logger.opt(exception=exc).warning("evaluating {}/{} failed inside kz; the batch goes on", candidate.problem, candidate.sample_id)
            message = (
                f"kz failed while evaluating this candidate ({type(exc).__name__}: {str(exc)[:500]}); the rest of the batch "
                "went on. If it happens again, report it as a kz bug with this candidate."
            )
            return self._finish(candidate, self.problems.get(candidate.problem), [Finding("not_run", message)], started)

    # -- the pipeline -------------------------------------------------------------------

    def _finish(self, candidate: Candidate, problem: Problem | None, findings: list[Finding], started: float, **fields: Any) -> EvalResult:
        verdict = decide_verdict(findings)
        timings = fields.pop("timings", StageTimings())
        timings = attrs.evolve(timings, total_s=time.perf_counter() - started)
        return EvalResult(
            problem=candidate.problem,
            sample_id=candidate.sample_id,
            backend=candidate.backend,
            verdict=verdict,
            findings=tuple(findings),
            timings=timings,
            problem_hash=problem.content_hash if problem else "",
            candidate_hash=candidate.content_hash,
            message=summary_message(verdict, findings),
            **fields,
        )

    def _environment(self) -> Environment:
        identity = self._candidate_pool.identity or self.references.pool.identity or {}
        return Environment(
            isolation=self._zygote.support.summary(),
            device=self.device,
            device_name=identity.get("device_name", ""),
            python=identity.get("python", ""),
            torch=identity.get("torch", ""),
            backend_version=identity.get("backend_versions", ""),
            driver=identity.get("driver", ""),
        )

    def check(self, candidates: Sequence[Candidate], progress: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
        """Static checks and compilation only, for any backend and device: nothing runs.

        ``kz check`` uses it to find format, static and compiler errors before any GPU time
        is spent (NVRTC compiles CUDA on a CPU).
        """
        if self.lanes and isinstance(self.lanes[0], Evaluator):  # nothing runs: one device's workers compile them all
            return self.lanes[0].check(candidates, progress)
        if self.lanes:  # Ray actors: nothing runs, so this host compiles them (as a CPU can)
            with Evaluator(self.problems.values(), _on_device(self.config, "cpu", engine="local")) as evaluator:
                return evaluator.check(candidates, progress)
        results: list[CheckResult | None] = [None] * len(candidates)
        with concurrent.futures.ThreadPoolExecutor(max_workers=self._candidate_pool.size + 1, thread_name_prefix="kz-check") as executor:
            futures = {executor.submit(self._evaluate, candidate, True): i for i, candidate in enumerate(candidates)}
            for future in concurrent.futures.as_completed(futures):
                evaluated = future.result()
                compiled = evaluated.verdict is Verdict.CORRECT
                notes = "; ".join(f.message for f in evaluated.findings if f.check == "backend")
                result = CheckResult(
                    problem=evaluated.problem,
                    sample_id=evaluated.sample_id,
                    backend=evaluated.backend,
                    status="compiled" if compiled else evaluated.verdict.value,
                    findings=evaluated.findings,
                    compile_s=evaluated.timings.compile_s,
                    message=f"compiled{f' ({notes})' if notes else ''}; not run (kz check runs nothing)" if compiled else evaluated.message,
                )
                results[futures[future]] = result
                if progress is not None:
                    progress(result)
        return results  # type: ignore[return-value]

    def _evaluate(self, candidate: Candidate, compile_only: bool = False) -> EvalResult:
        problem = self.problems.get(candidate.problem)
        # Its problem's reference worker is kept while the candidate is in flight (its
        # comparisons, timed outputs and baselines need it again).
        try:
            with self.references.pinned(problem) if problem is not None else contextlib.nullcontext():
                return self._evaluate_pinned(candidate, compile_only)
        finally:
            if getattr(self._slot, "large", False):
                with self._memory_lock:
                    self._slot.large = False
                    self._large_in_flight -= 1
                    if self._memory is not None:
                        self._set_aside_for_in_flight(self._memory)

    def _evaluate_pinned(self, candidate: Candidate, compile_only: bool = False) -> EvalResult:
        started = time.perf_counter()
        problem = self.problems.get(candidate.problem)
        if problem is None:
            finding = Finding("unknown_problem", f"no problem named {candidate.problem!r} among the {len(self.problems)} loaded")
            return self._finish(candidate, None, [finding], started)
        if candidate.backend not in self.backends:
            installed = ", ".join(sorted(self.backends)) or "none"
            finding = Finding("unknown_backend", f"no installed plugin provides backend {candidate.backend!r} (installed: {installed})")
            return self._finish(candidate, problem, [finding], started)
        static_started = time.perf_counter()
        try:
            findings = [f for group in self.pm.hook.static_checks(candidate=candidate, problem=problem) for f in group]
        except Exception as exc:  # noqa: BLE001 - a check's own bug fails this candidate, not the batch
            logger.exception("a static check failed on {}/{}", candidate.problem, candidate.sample_id)
            finding = Finding("not_run", f"a static check failed ({type(exc).__name__}: {exc}); not the candidate's fault, so not journaled")
            return self._finish(candidate, problem, [finding], started)
        timings = StageTimings(static_s=time.perf_counter() - static_started)
        if any(f.severity is Severity.ERROR for f in findings):
            return self._finish(candidate, problem, findings, started, timings=timings)
        info = self.backends.get(candidate.backend)
        runs_here = self.device != "cpu" or info is None or info.runs_on_cpu
        reference = ReferenceRecord()
        if runs_here and not compile_only:
            reference_started = time.perf_counter()
            reference = self.references.get(problem)
            timings = attrs.evolve(timings, reference_s=time.perf_counter() - reference_started)
            if reference.error:
                findings.append(Finding("reference_error", f"the problem's reference failed, so nothing can be checked: {reference.error}"))
                return self._finish(candidate, problem, findings, started, timings=timings)
            self.contention.note_footprint(problem.content_hash, reference.footprint_bytes)
            self._note_large(reference)
        why_unverified = f"backend {candidate.backend!r} has no trusted kernels (backend_kernels)"
        if info is not None and info.trusted_kernels and runs_here and not compile_only:
            try:
                return self._evaluate_verified(candidate, problem, reference, list(findings), timings, started)
            except WorkerStartError as exc:
                raise EvaluatorError(str(exc)) from exc
            except _Unreplayable as exc:  # BackendInfo.unverified_fallback
                why_unverified = f"its forward could not be recorded for the trusted executor ({exc})"
        if runs_here and not compile_only:
            findings.append(
                Finding(
                    "unverified_execution",
                    f"{why_unverified}: this candidate's forward ran, was checked and was timed in its own sandboxed process, "
                    "whose launch counts and timings it could have changed",
                    Severity.WARNING,
                )
            )
        try:
            waiting_started = time.perf_counter()
            with self.contention.hold("candidate worker", self._candidate_pool.acquire()) as worker:
                timings = attrs.evolve(timings, waiting_s=time.perf_counter() - waiting_started)
                return self._run_candidate(worker, candidate, problem, reference, findings, timings, started, compile_only)
        except WorkerStartError as exc:
            raise EvaluatorError(str(exc)) from exc

    def _run_candidate(
        self,
        worker: WorkerProcess,
        candidate: Candidate,
        problem: Problem,
        reference: ReferenceRecord,
        findings: list[Finding],
        timings: StageTimings,
        started: float,
        compile_only: bool = False,
    ) -> EvalResult:
        environment = self._environment()
        load_started = time.perf_counter()
        reply, failure = self._load(worker, candidate, problem)
        timings = attrs.evolve(timings, compile_s=time.perf_counter() - load_started)
        if failure is not None:
            result = self._finish(candidate, problem, findings + [failure], started, timings=timings, environment=environment)
            return result if reply is not None else self._retire(worker, result)  # a compile failure leaves its worker clean
        findings += [Finding("backend", note, Severity.INFO) for note in reply["notes"]]
        if reply["threads_started"] > 0:
            findings.append(Finding("thread_or_stream", "loading the candidate started threads"))
        if reply["streams_created"] > 0:
            findings.append(Finding("thread_or_stream", "loading the candidate created CUDA streams; kernels must run on the caller's stream"))
        info = self.backends.get(candidate.backend)
        cannot_run = self.device == "cpu" and info is not None and not info.runs_on_cpu
        if compile_only or cannot_run:  # nothing runs: no reference was computed either
            if cannot_run and not compile_only:
                notes = "; ".join(reply["notes"]) or "compiled"
                findings.append(Finding("not_run", f"{notes}; not run: backend {candidate.backend!r} needs a GPU (use --device cuda)"))
            call_worker(worker, {"op": "unload"}, 60, "unload")
            return self._finish(candidate, problem, findings, started, timings=timings, environment=environment)

        # A problem whose inputs and outputs are large reserves GPU memory from its trials
        # to its timing, so that concurrent workers cannot exhaust it.
        turn_started = time.perf_counter()
        with self._reservation(reference):
            timings = attrs.evolve(timings, waiting_s=(timings.waiting_s or 0.0) + time.perf_counter() - turn_started)
            return self._run_loaded(worker, candidate, problem, reference, findings, timings, started, environment)

    def _load(self, worker: WorkerProcess, candidate: Candidate, problem: Problem) -> tuple[dict[str, Any] | None, Finding | None]:
        """Load ``candidate`` in a candidate worker: ``(reply, None)`` when it loaded;
        ``(reply, finding)`` when it did not compile (the worker is clean); ``(None,
        finding)`` when the call failed or the reply is malformed (the worker is not).
        The builds it defers are made here and it loads again in the same worker: the
        path of a backend without trusted kernels, which holds no GPU lock while it loads
        (a verified candidate's builds are made with nothing held: :meth:`_evaluate_verified`)."""
        builds = _DeferredBuilds()
        for _ in range(MAX_BUILD_ROUNDS):
            reply, failure, deferred = self._load_once(worker, candidate, problem, builds.made)
            if deferred is None:
                if reply is not None and failure is None:
                    builds.note(reply)
                return reply, failure
            built = builds.make(self, deferred)
            if built is not None:
                return None, built
        return None, _deferred_too_often()

    def _load_once(
        self, worker: WorkerProcess, candidate: Candidate, problem: Problem, made: set[str]
    ) -> tuple[dict[str, Any] | None, Finding | None, list[Any] | None]:
        """One load request: :meth:`_load`'s ``(reply, finding)`` and None; or ``(None,
        None, entries)``: the builds the load deferred to kz's trusted builder, to be made
        before it loads again. A build deferred again once made (``made``: their
        :func:`_entry_key`) is ``not_run``: the worker did not find what the builder made."""
        request = {"op": "load", "candidate": attrs.asdict(candidate), "problem": problem_payload(problem), "init_seed": self.seeds.init}
        reply, failure = call_worker(worker, request, self.config.compile_timeout_s, "compile")
        deferred = reply.get("deferred_builds") if isinstance(reply, dict) else None
        if deferred:
            # The same build asked for again once it was made: the worker did not find what
            # the builder made (the two saw different toolchains), not the candidate's fault.
            again = [entry for entry in deferred if isinstance(entry, dict) and not entry.get("optional") and _entry_key(entry) in made]
            if again:
                return None, Finding(
                    "not_run",
                    f"kz's builder made the {again[0].get('backend')} build this candidate deferred, but its worker did not find it: the two "
                    "processes described the toolchain differently (e.g. nvcc did not answer in one of them); not the candidate's fault, evaluate it again",
                ), None
            return None, None, deferred
        if failure is not None or reply is None:
            return None, failure, None
        try:
            reply = validate_load(reply)
        except ReplyError as exc:
            return None, Finding("runtime_error", f"the candidate's reply is malformed: {exc}"), None
        return reply, (self._load_failure(reply) if reply["failure"] else None), None

    def _build_deferred(self, entries: Any) -> Finding | None:
        """Have kz's trusted builder make each deferred build and share it; a finding when
        one cannot be made (the machine cannot build, the builder failed)."""
        builders = {name: info for name, info in self.backends.items() if info.builder and info.build_identity}
        try:
            entries = validate_deferred(entries, builders)
        except ValueError as exc:
            return Finding("runtime_error", f"the candidate's reply is malformed: {exc}")
        for entry in entries:
            finding = self._build_one(entry["backend"], entry["arguments"])
            if finding is not None and not entry.get("optional"):
                return finding
        return None

    def _build_one(self, backend: str, arguments: Any) -> Finding | None:
        """One build in a fresh builder (a candidate worker that loads no candidate), moved
        into the shared folder under the key computed here."""
        with self._builds_lock:
            if self._builder_pool is None:
                size = max(1, min(8, (os.cpu_count() or 2) // 2))  # two compiler processes per build
                # Its build is taken from its scratch folder once it ends: on the disk, not in memory.
                settings = attrs.evolve(self._candidate_pool.settings, memory_scratch=False)
                self._builder_pool = WorkerPool(self.device, "candidate", size, settings, zygote=self._zygote)
        pool, shared = self._builder_pool, self._shared_builds
        if backend not in shared.identities:
            with pool.acquire() as builder:
                reply, failure = call_worker(builder, {"op": "build", "backend": backend, "identity": True}, 120, "build")
            if failure is not None or reply is None:
                return Finding("not_run", f"kz's builder could not describe its toolchain: {failure.message if failure else 'no reply'}")
            shared.identities[backend] = reply.get("identity")
        try:
            key = shared_key(backend, arguments, shared.identities[backend])
        except (TypeError, ValueError) as exc:
            return Finding("runtime_error", f"the candidate's reply is malformed: build arguments that are not data ({exc})")
        with shared.lock(key):
            if (shared.root / backend / key).exists():
                return None
            with pool.acquire() as builder:
                reply, failure = call_worker(builder, {"op": "build", "backend": backend, "arguments": arguments}, self.config.compile_timeout_s, "build")
                if failure is not None or reply is None:
                    return failure or Finding("compile_error", "kz's builder sent no reply")
                record = reply.get("record") if isinstance(reply.get("record"), dict) else {}
                if record.get("status") == "unavailable":
                    return Finding("not_run", f"{record.get('message', 'this machine cannot build it')}; not the candidate's fault")
                if record.get("retry"):
                    # Unfinished (a timeout): a compile error now, built again next time.
                    message = str(record.get("message", "kz's builder did not finish the build"))[:2000]
                    return Finding("compile_error", f"{message}; kz's builder did not finish it, so nothing of it is shared and a later evaluation builds it again")
                # Nothing of the build may still run while its folder is checked and moved
                # (a compiler driven by the candidate's flags could swap a file for a link).
                builder.kill()
                with contextlib.suppress(Exception):
                    builder.process.wait(timeout=30)
                if builder.process.poll() is None:
                    return Finding("compile_error", "kz's builder did not end: its build is not shared")
                if not publish(builder.scratch / "build", shared.root, backend, key):
                    return Finding("compile_error", "kz's builder left something other than plain files and folders: not shared")
        return None

    @staticmethod
    def _load_failure(reply: dict[str, Any]) -> Finding:
        """The finding for a failed load (candidate worker, its reply checked by
        ``validate_load``) or prepare (executor, which may name the finding)."""
        compile_failure = reply["failure"]
        message = compile_failure["message"] + (f"\n{compile_failure['log']}" if compile_failure.get("log") else "")
        if compile_failure.get("check"):
            check = compile_failure["check"]
        elif compile_failure["verdict"] == Verdict.FORMAT_ERROR.value:
            check = "syntax_error" if "syntax" in compile_failure["message"] else "no_model_new"
        elif compile_failure["verdict"] == Verdict.RUNTIME_ERROR.value:
            check = "not_run"  # this machine cannot compile it (no toolchain): not the candidate's fault
        else:
            check = "compile_error"
        return Finding(check, message, line=compile_failure.get("line"))

    # -- the verified path: record in the candidate's process, replay in an executor -----

    def _evaluate_verified(
        self, candidate: Candidate, problem: Problem, reference: ReferenceRecord, findings: list[Finding], timings: StageTimings, started: float
    ) -> EvalResult:
        """Load and record the candidate in a sandboxed candidate worker, replay its plans
        in a fresh executor on the secret inputs, judge, and time the replay.

        Lock order: an executor; then, for a large problem, a GPU memory reservation; the
        GPU lock (shared) and a candidate worker, which is killed before the GPU lock is
        released, so that nothing of the candidate's runs while anything is timed; then
        the reservation again, and inside it the GPU lock again (shared for the trials,
        exclusive for timing). Nothing waits for a lock while it holds a candidate worker.

        Builds the load deferred to kz's trusted builder are made once that worker is
        killed and the GPU lock and the reservation are given back (only the executor,
        which has run nothing yet, is kept); then the candidate loads again in a fresh
        worker, as at first. A cold ``load_inline`` build takes tens of seconds of nvcc,
        and made with the GPU held shared it held back every neighbour's timing (an
        exclusive take waits for every shared holder), and every shared take behind it.
        """
        environment = self._environment()
        waiting_started = time.perf_counter()
        with self.contention.hold("executor", self._executor_pool.acquire()) as executor:
            builds = _DeferredBuilds()
            for _ in range(MAX_BUILD_ROUNDS):
                with self._reservation(reference), self._gpu.shared(), self.contention.hold("candidate worker", self._candidate_pool.acquire()) as worker:
                    timings = attrs.evolve(timings, waiting_s=(timings.waiting_s or 0.0) + time.perf_counter() - waiting_started)
                    load_started = time.perf_counter()
                    recorded = None
                    reply, failure, deferred = self._load_once(worker, candidate, problem, builds.made)
                    if failure is None and deferred is None:
                        builds.note(reply)
                        findings += [Finding("backend", note, Severity.INFO) for note in reply["notes"]]
                        reply, failure = call_worker(worker, self._record_request(problem, reference), self.config.compile_timeout_s + self.config.run_timeout_s, "recording forward")
                        # The recording's own sealed file: its constants go to its executor by it
                        recorded = getattr(worker, "reply_file", None) if failure is None else None
                    timings = attrs.evolve(timings, compile_s=(timings.compile_s or 0.0) + time.perf_counter() - load_started)
                    worker.kill()  # nothing of the candidate's runs from here on
                if deferred is None:
                    break
                # With nothing of the GPU held, and no process of the candidate's left.
                build_started = time.perf_counter()
                failure = builds.make(self, deferred)
                timings = attrs.evolve(timings, compile_s=(timings.compile_s or 0.0) + time.perf_counter() - build_started)
                if failure is not None:
                    break
                waiting_started = time.perf_counter()
            else:
                failure = _deferred_too_often()
            if failure is not None or reply is None:
                return self._finish(candidate, problem, findings + [failure], started, timings=timings, environment=environment)
            plans, constants, unreplayable = self._received_plans(reply)
            if unreplayable is not None:
                info = self.backends.get(candidate.backend)
                if unreplayable.check == "not_replayable" and info is not None and info.unverified_fallback:
                    if self.config.unverified_fallback:
                        raise _Unreplayable(unreplayable.message.removeprefix("its forward cannot be replayed: "))
                    # Run in its own process, a candidate could forge what decides its
                    # verdict; taking that route is the candidate's choice (a
                    # cudaMemcpyToSymbol is enough), so it is refused unless asked for.
                    unreplayable = refused_unverified(unreplayable)
                return self._finish(candidate, problem, findings + [unreplayable], started, timings=timings, environment=environment)
            # The executor builds the kernels and takes the plans before anything is run.
            prepare = {
                "op": "prepare",
                "candidate": attrs.asdict(candidate),
                "problem": problem_payload(problem),
                "plans": {key: (plans[key], constants[key]) for key in plans},
            }
            prepare_started = time.perf_counter()
            reply, failure = _executor_call(executor, prepare, self.config.compile_timeout_s, "compile", files=(recorded,) if recorded is not None else ())
            # The executor holds the plans now: their constants (the reply's memory here,
            # gigabytes for KernelBench's largest layers) are not kept through the trials,
            # the wait for the GPU and the timing, where they filled the budget for the
            # replies of the candidates beside this one.
            del prepare, plans, constants, recorded
            if failure is None and reply is not None and reply.get("failure"):
                failure = self._load_failure(reply)
            timings = attrs.evolve(timings, compile_s=(timings.compile_s or 0.0) + time.perf_counter() - prepare_started)
            if failure is not None or reply is None:
                executor.kill()
                return self._finish(candidate, problem, findings + [failure], started, timings=timings, environment=environment)
            # A problem whose inputs and outputs are large reserves GPU memory again, for its
            # trials, their comparisons and its fuzzing (the executor built its kernels
            # without it); its timing needs none (_judge_verified).
            turn_started = time.perf_counter()
            with self._replay_turn(reference) as release:
                timings = attrs.evolve(timings, waiting_s=(timings.waiting_s or 0.0) + time.perf_counter() - turn_started)
                return self._replay_verified(executor, candidate, problem, reference, findings, timings, started, environment, release)

    @contextlib.contextmanager
    def _replay_turn(self, reference: ReferenceRecord) -> Iterator[Callable[[], None] | None]:
        """A verified candidate's reservation for its replay (:meth:`_reservation`), and
        what gives it back early, before the candidate is timed (:meth:`_judge_verified`);
        ``None`` when it is evaluated again alone, which keeps its turn (the whole budget,
        maybe the GPU lock) to its end."""
        with contextlib.ExitStack() as turn:
            turn.enter_context(self._reservation(reference))
            yield None if self._running_alone() else turn.close

    def _replay_verified(
        self,
        executor: WorkerProcess,
        candidate: Candidate,
        problem: Problem,
        reference: ReferenceRecord,
        findings: list[Finding],
        timings: StageTimings,
        started: float,
        environment: Environment,
        release: Callable[[], None] | None = None,
    ) -> EvalResult:
        """The executor's part: replay the plans on the trials, judge, fuzz and time
        (``release``: see :meth:`_judge_verified`)."""
        with self._gpu.shared():
            trials_started = time.perf_counter()
            reply, failure = self._execute(executor, problem, reference)
            timings = attrs.evolve(timings, correctness_s=time.perf_counter() - trials_started)
        if failure is not None or reply is None:
            executor.kill()
            return self._finish(candidate, problem, findings + [failure], started, timings=timings, environment=environment)
        return self._judge_verified(executor, candidate, problem, reference, reply, findings, timings, started, environment, release)

    def _record_request(self, problem: Problem, reference: ReferenceRecord) -> dict[str, Any]:
        """Plans to record: the problem's inputs, and its size variation, on decoy seeds
        (fresh random ones, never the trials' or the timing's)."""
        signatures = [{"key": "default", "seed": secrets.randbits(62)}]
        if reference.variant:
            signatures.append({"key": "variant", "seed": secrets.randbits(62), "overrides": reference.variant["overrides"]})
        return {
            "op": "record",
            "signatures": signatures,
            "problem": problem_payload(problem),
            "init_seed": self.seeds.init,
            "warmup": 2,
            # A second recording after a secret number of further calls: the candidate
            # cannot know which calls are recorded (fewer on a CPU, where calls are slow
            # and nothing is timed for speed).
            "gap": secrets.randbelow(4 if self.device == "cpu" else 32),
            "gap_s": RECORD_GAP_S,
            "capture": self.config.timing_method == "graph",
            "max_constant_bytes": int(self.config.plan_constant_mb) << 20,
        }

    def _received_plans(self, reply: dict[str, Any], required: str = "default") -> tuple[dict[str, Any], dict[str, list[Any]], Finding | None]:
        """The plans a candidate worker sent, checked to be plans at all (the executor
        validates each field); a signature the forward could not be recorded for is a
        ``not_replayable`` finding."""
        import torch

        plans: dict[str, Any] = {}
        constants: dict[str, list[Any]] = {}
        received = reply.get("plans")
        if not isinstance(received, dict) or required not in received:
            return {}, {}, Finding("not_replayable", "the candidate's process sent no plan of its forward call")
        for key, entry in received.items():
            if not isinstance(entry, dict):
                return {}, {}, Finding("not_replayable", f"malformed plan {key!r}")
            if "failure" in entry:
                check = "output_type" if entry.get("check") == "output_type" else "not_replayable"
                return {}, {}, Finding(check, f"its forward cannot be replayed: {str(entry['failure'])[:500]}")
            tensors = entry.get("constants")
            if not isinstance(tensors, list) or not all(type(t) is torch.Tensor for t in tensors) or not isinstance(entry.get("plan"), dict):
                return {}, {}, Finding("not_replayable", f"malformed plan {key!r}")
            plans[key], constants[key] = entry["plan"], tensors
            if entry.get("elsewhere"):
                return {}, {}, Finding("thread_or_stream", f"{str(entry['elsewhere'][0])[:300]}: kernels must run on the caller's thread and stream")
            if "again" in entry:
                drift = plan_drift(entry["plan"], entry["again"])
                if drift:
                    return {}, {}, Finding("state_drift", f"its forward does other work from one call to the next: {drift}")
            if entry.get("captured"):
                drift = plan_drift(entry["plan"], entry["captured"])
                if drift:
                    hidden = plan_compute_ops(entry["captured"]) - plan_compute_ops(entry["plan"])
                    check = "torch_compute_in_forward" if hidden else "state_drift"
                    return {}, {}, Finding(check, f"its forward does other work while it is captured into a CUDA graph: {drift}")
        return plans, constants, None

    def _execute(self, executor: WorkerProcess, problem: Problem, reference: ReferenceRecord) -> tuple[dict[str, Any] | None, Finding | None]:
        """Replay the plans on the correctness trials' inputs (and the size variation's);
        outputs too large to move are compared on the GPU, one trial at a time."""
        trials = [{"seed": seed, "plan": "default"} for seed in self.seeds.trials]
        if reference.variant:
            trials.append({"seed": reference.variant["seed"], "plan": "variant", "overrides": reference.variant["overrides"], "variant": True})
        for trial in trials:
            # What the reference returned, so that the executor sends no output that could
            # not match (a huge tensor is described, never moved).
            trial["expected"] = [[meta["dtype"], meta["shape"]] for meta in reference.trials[trial["seed"]]["output_meta"]]
        request = {"op": "execute", "problem": problem_payload(problem), "poison_mb": self.config.poison_mb}
        if not reference.on_device:
            return _executor_call(executor, {**request, "trials": trials}, self.config.run_timeout_s, "correctness trials")
        merged: dict[str, Any] = {"ok": True, "trials": []}
        # The caller holds the GPU shared through all the trials. Taken again for each
        # trial (tenth session, on the H200), a trial waited behind every timing queued
        # meanwhile, holding its memory reservation idle: the trials' median rose from 4.2
        # to 9.9 s and a reservation was held 6.6 s a take instead of 5.1.
        for trial in trials:
            reply, failure = _executor_call(executor, {**request, "trials": [trial], "share": True}, self.config.run_timeout_s, "correctness trials")
            if failure is not None or reply is None:
                return reply, failure
            for record in reply["trials"]:
                record["comparison"] = self.references.compare_on_device(problem, record, record.get("variant"), f"trial {len(merged['trials']) + 1}", executor=True)
                merged["trials"].append(record)
            call_worker(executor, {"op": "release_held"}, 60, "release")
        return merged, None

    def _judge_verified(
        self,
        executor: WorkerProcess,
        candidate: Candidate,
        problem: Problem,
        reference: ReferenceRecord,
        reply: dict[str, Any],
        findings: list[Finding],
        timings: StageTimings,
        started: float,
        environment: Environment,
        release: Callable[[], None] | None = None,
    ) -> EvalResult:
        """Judge the trials, fuzz and time.

        :param release: gives the candidate's GPU memory reservation back before it is
            timed. Timing holds the GPU lock exclusive: every other holder has finished
            its GPU work (and given back the memory it used, as workers do after each
            request) before it starts, and none starts until it ends, so no neighbour's
            work needs the memory meanwhile; the comparisons of outputs too large to move
            are made inside that hold (``_time_candidate``), or after it under a
            reservation of their own (``_compare_after_hold``). Held on, the reservation sat
            idle while the candidate waited for the lock and was timed: on an H100, large
            problems' reservations were waited for 657 s and held 688 s in a run of 379
            s (KernelBench level 1, fortieth session).
        """
        try:
            reply = validate_execution(reply, self.seeds, reference)
        except ReplyError as exc:
            executor.kill()
            return self._finish(candidate, problem, findings + [Finding("runtime_error", f"the executor's reply is malformed: {exc}")], started, timings=timings, environment=environment)
        fields = self._judge(problem, reference, reply, findings, timings, environment)
        if decide_verdict(findings) is Verdict.CORRECT and self.config.fuzz > 0:
            findings += self._fuzz(problem, candidate, executor=executor)
        if decide_verdict(findings) is Verdict.CORRECT and self.config.timing:
            if release is not None:
                release()
            fields.update(self._time(executor, problem, reference, findings, verified=True))
            fields["timings"] = attrs.evolve(timings, timing_s=fields.pop("timing_s", None), baseline_s=fields.pop("baseline_s", None))
            fields.pop("retire", None)
        executor.kill()
        return self._finish(candidate, problem, findings, started, **fields)

    def _run_loaded(
        self,
        worker: WorkerProcess,
        candidate: Candidate,
        problem: Problem,
        reference: ReferenceRecord,
        findings: list[Finding],
        timings: StageTimings,
        started: float,
        environment: Environment,
    ) -> EvalResult:
        """Trials, fuzzing and timing of a loaded candidate, then its unload."""
        trials_started = time.perf_counter()
        with self._gpu.shared():
            reply, failure = self._trials(worker, problem, reference)
        timings = attrs.evolve(timings, correctness_s=time.perf_counter() - trials_started)
        if failure is None and reply is not None:
            drawn = set(self.seeds.trials) | ({reference.variant["seed"]} if reference.variant else set())
            try:
                reply = validate_trials(reply, drawn, compared=reference.on_device)
            except ReplyError as exc:
                reply, failure = None, Finding("runtime_error", f"the candidate's reply is malformed: {exc}")
        if failure is not None or reply is None:
            return self._retire(worker, self._finish(candidate, problem, findings + [failure], started, timings=timings, environment=environment))
        fields = self._judge(problem, reference, reply, findings, timings, environment)
        if decide_verdict(findings) is Verdict.CORRECT and self.config.fuzz > 0:
            findings += self._fuzz(problem, candidate, worker=worker)
        retire = False
        if decide_verdict(findings) is Verdict.CORRECT and self.config.timing:
            fields.update(self._time(worker, problem, reference, findings))
            fields["timings"] = attrs.evolve(timings, timing_s=fields.pop("timing_s", None), baseline_s=fields.pop("baseline_s", None))
            retire = fields.pop("retire", False)
        unload, _ = call_worker(worker, {"op": "unload"}, 60, "unload")
        if retire:
            worker.kill()  # a failed graph capture left its random generator unusable
        if unload and unload.get("flags_changed"):
            name, (before, after) = next(iter(unload["flags_changed"].items()))
            findings.append(Finding("global_flags", f"the candidate changed {name} from {before} to {after}"))
        result = self._finish(candidate, problem, findings, started, **fields)
        return self._retire(worker, result) if result.verdict in _RETIRE_AFTER else result

    def _judge(
        self, problem: Problem, reference: ReferenceRecord, reply: dict[str, Any], findings: list[Finding], timings: StageTimings, environment: Environment
    ) -> dict[str, Any]:
        """Judge a checked trials reply into ``findings``; the result's fields so far."""
        trial_findings, max_abs, max_rel, launches = judge_trials(
            problem,
            reference.trials,
            reply,
            pm=self.pm,
            tolerance_table=self.config.tolerance,
            atol=self.config.atol,
            rtol=self.config.rtol,
            guards=self.config.guards,
        )
        findings += trial_findings
        findings.append(
            Finding(
                "reference_tf32",
                f"references computed with TF32 {'on' if self.config.reference_tf32 else 'off (exact fp32 matmuls and convolutions)'}",
                Severity.INFO,
            )
        )
        if self.config.size_variation and not reference.variant:
            findings.append(
                Finding(
                    "no_size_variation",
                    "checked at the problem's own sizes only: no size variation was made (its get_inputs reads no "
                    "module-level size constant, as when sizes are written inline, or the reference failed at the varied sizes); "
                    "`kz eval --fuzz N` also tries other layouts and values",
                    Severity.INFO,
                )
            )
        return dict(timings=timings, environment=environment, max_abs_error=max_abs, max_rel_error=max_rel, launches=launches)

    def _trials(self, worker: WorkerProcess, problem: Problem, reference: ReferenceRecord) -> tuple[dict[str, Any] | None, Finding | None]:
        """Run the correctness trials; outputs too large to move are compared on the GPU."""
        request = {
            "op": "trials",
            "seeds": list(self.seeds.trials),
            "poison_mb": self.config.poison_mb,
            "profile": True,
            "problem": problem_payload(problem),
            "init_seed": self.seeds.init,
            "variant": reference.variant,
        }
        if not reference.on_device:
            return call_worker(worker, request, self.config.run_timeout_s, "correctness trials")
        # One call per trial, each followed by the comparison, so that only one trial's
        # outputs occupy GPU memory at a time.
        merged: dict[str, Any] = {"ok": True, "trials": [], "compute_ops": [], "kernel_streams": []}
        steps = [{"seeds": [seed], "variant": None, "profile": index == 0} for index, seed in enumerate(self.seeds.trials)]
        if reference.variant:
            steps.append({"seeds": [], "variant": reference.variant, "profile": False})
        for step in steps:
            reply, failure = call_worker(worker, {**request, **step, "share": True}, self.config.run_timeout_s, "correctness trials")
            if failure is not None or reply is None:
                return reply, failure
            if step["profile"]:
                merged["compute_ops"], merged["kernel_streams"] = reply["compute_ops"], reply["kernel_streams"]
            for trial in reply["trials"]:
                trial["comparison"] = self.references.compare_on_device(problem, trial, trial.get("variant"), f"trial {len(merged['trials']) + 1}")
                merged["trials"].append(trial)
            call_worker(worker, {"op": "release"}, 60, "release")
        return merged, None

    def _fuzz(self, problem: Problem, candidate: Candidate, worker: WorkerProcess | None = None, executor: WorkerProcess | None = None) -> list[Finding]:
        """``eval.fuzz`` examples; a failure is a ``fuzz`` finding. With ``worker``: on the
        candidate loaded there. With ``executor``: plans recorded in a new candidate worker
        (alive only while the GPU is held shared), replayed in this candidate's executor."""
        from kz_core.evaluate.fuzzing import FuzzSession

        with self._gpu.shared() if executor is not None else contextlib.nullcontext():
            with FuzzSession(problem, candidate, evaluator=self, worker=worker, executor=executor) as session:
                report = session.run(self.config.fuzz)
        if report.failure:
            return [Finding("fuzz", f"failed a fuzz example after {report.examples} examples, shrunk to the smallest: {report.failure}")]
        if report.error:
            return [Finding("fuzz_skipped", f"fuzzing could not run: {report.error}", Severity.WARNING)]
        return [Finding("fuzz", f"passed {report.examples} fuzz examples ({report.discarded} discarded)", Severity.INFO)]

    def _retire(self, worker: WorkerProcess, result: EvalResult) -> EvalResult:
        """Replace a worker that ran a failing or cheating candidate (its process may be dirty)."""
        worker.kill()
        return result

    def _time(self, worker: WorkerProcess, problem: Problem, reference: ReferenceRecord, findings: list[Finding], verified: bool = False) -> dict[str, Any]:
        """Time the candidate and its baselines with the same clock.

        The baselines are timed in the candidate's exclusive hold of the GPU, right after
        its timing reply (before its timed outputs are judged; those too large to move are
        compared on the device in the same hold, after the baselines, or after the hold
        with ``eval.timed_outputs_compared=after_hold``): each
        exclusive take first waits for every shared holder to finish (their compiles,
        trials, references), and no new one starts meanwhile. On the H200 (nineteenth
        session, KernelBench level 1) the 199 takes of 100 candidates waited 440 s for
        145 s held, and shared holders waited 588 s behind them. The ``compile``
        baseline's model is compiled before, with the GPU shared
        (``ReferenceService.compile_ahead``): only its timing is in the hold.

        With graph timing, a candidate that cannot be captured is compared with baselines
        timed with events; a baseline that cannot be captured has the candidate timed
        again with events, so that a speedup never compares two clocks.
        """
        spent: dict[str, Any] = {"timing_s": None, "baseline_s": None, "retire": False}

        def timed(stage: str, function: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[stage] = (spent[stage] or 0.0) + time.perf_counter() - started

        events = attrs.evolve(self._timing, method="events")
        # What timing a baseline with the candidate found wrong, by timing method: added to
        # the findings when the candidate is compared with that baseline.
        early: dict[str, list[Finding]] = {}

        def with_baselines(reply: dict[str, Any]) -> None:
            # The reply is not validated yet: it only picks the clock of the baselines timed
            # now. A wrong pick times a baseline for nothing (kept for the next candidate).
            stats = reply.get("stats")
            settings = self._timing if isinstance(stats, dict) and stats.get("clock") == GRAPH_CLOCK else events
            early[settings.method] = []
            started = time.perf_counter()
            timed("baseline_s", self._baselines, problem, settings, early[settings.method])
            spent["timing_s"] = (spent["timing_s"] or 0.0) - (time.perf_counter() - started)  # not counted twice

        def baselines_for(settings: TimingSettings) -> dict[str, RuntimeStats]:
            baselines = timed("baseline_s", self._baselines, problem, settings, findings)
            findings.extend(early.pop(settings.method, []))
            return baselines

        fields = spent
        then = with_baselines if self.device != "cpu" else None
        if then is not None and not self._running_alone():
            # Compiled now, with the GPU shared, not in the exclusive hold below; a
            # candidate evaluated again alone keeps its turn and compiles it there.
            timed("baseline_s", self.references.compile_ahead, problem, self._reservation(reference))
        reply, failure = timed("timing_s", self._time_candidate, worker, problem, reference, self._timing, findings, verified, then=then)
        spent["retire"] = bool(reply and reply.get("retire"))
        if reply is not None and not spent["retire"] and self.device != "cpu" and _slower_on_unseen(reply, failure):
            # Slower on unseen inputs than on the repeated ones: a memoiser, or an honest
            # kernel slowed once by another process (on the H200, KernelBench references at
            # 1.25-1.3 times, once in a hundred; with events timing, one at 5.2 times, which
            # was rejected as memoising). Timed once more, on unseen inputs of its own (the
            # first timing's it may have kept answers for), and judged and paid on that
            # timing alone: a memoiser is as slow there again.
            reply, failure = timed("timing_s", self._time_candidate, worker, problem, reference, self._timing, findings, verified, unseen=Seeds.fresh_unseen())
            spent["retire"] = bool(reply and reply.get("retire"))
        if failure is not None or reply is None:
            findings.append(failure)  # type: ignore[arg-type]
            return fields
        runtime = self._rewarded_runtime(from_json_dict(RuntimeStats, reply["stats"]), findings)
        fields["runtime"] = runtime
        if self.device == "cpu":
            return fields  # CPU timings are recorded, never turned into speedups
        if self._timing.method == "graph" and runtime.clock != GRAPH_CLOCK:
            findings.append(Finding("timing_fallback", runtime.note or "timed with CUDA events: it could not be captured into a CUDA graph", Severity.WARNING))
        settings = self._timing if runtime.clock == GRAPH_CLOCK else events
        baselines = baselines_for(settings)
        if runtime.clock == GRAPH_CLOCK and any(stats.clock != GRAPH_CLOCK for stats in baselines.values()):
            # A baseline could not be captured: time the candidate like it, with events.
            # Unseen inputs of its own: it may have kept what it computed for the first ones.
            reply, failure = timed("timing_s", self._time_candidate, worker, problem, reference, events, findings, verified, then=with_baselines, unseen=Seeds.fresh_unseen())
            spent["retire"] = spent["retire"] or bool(reply and reply.get("retire"))
            if failure is not None or reply is None:
                findings.append(failure)  # type: ignore[arg-type]
                return fields
            findings[:] = [f for f in findings if f.check not in ("unseen_inputs_slower", "unseen_not_timed")]  # judged again on these timings
            runtime = self._rewarded_runtime(from_json_dict(RuntimeStats, reply["stats"]), findings)
            like = f"timed with CUDA events like its baselines ({_baseline_note(baselines)})"
            runtime = fields["runtime"] = attrs.evolve(runtime, note=f"{like}; {runtime.note}" if runtime.note else like)
            baselines = baselines_for(events)
        fields["baselines"] = baselines
        fields["speedups"] = {
            mode: stats.median_ms / runtime.median_ms for mode, stats in baselines.items() if runtime.median_ms > 0 and stats.clock == runtime.clock
        }
        bytes_moved = call_bytes(reference.trials[self.seeds.timing[0]])
        bandwidth = peak_bandwidth_gbps(self._environment().device_name, self.config.peak_bandwidth_gbps)
        flag = speed_of_light_finding(runtime.median_ms, bytes_moved, bandwidth)
        if flag is not None:
            findings.append(flag)
        return fields

    def _time_candidate(
        self,
        worker: WorkerProcess,
        problem: Problem,
        reference: ReferenceRecord,
        settings: TimingSettings,
        findings: list[Finding],
        verified: bool = False,
        then: Callable[[dict[str, Any]], None] | None = None,
        unseen: tuple[int, ...] | None = None,
    ) -> tuple[dict[str, Any] | None, Finding | None]:
        """One timing request: ``(reply, failure)``. Timed calls whose outputs differ from
        the reference's are the failure (``state_drift``), and so, under strict guards, are
        torch ops computing in the captured calls (a warning under ``warn``), and a time on
        unseen inputs far above the median (``memoisation``; a time only somewhat above it
        is the caller's to pay, ``_rewarded_runtime``).

        :param then: called with the reply (not yet validated) while the GPU is still held
            exclusive, when the request got one.
        :param unseen: on a GPU, unseen seeds of this timing's own instead of the
            evaluator's (a second timing of one candidate: it may have kept what it computed
            for the first one's). The reference has no outputs for them, so every timed
            output is shared and compared on the device.
        """
        own = unseen is not None
        unseen = (unseen if own else tuple(self.seeds.unseen)) if self.device != "cpu" else ()
        share = reference.on_device or (own and bool(unseen))
        request = {
            "op": "time_plan" if verified else "time",
            "plan": "default",
            "seeds": list(self.seeds.timing),
            "decoys": list(self.seeds.decoys),
            "settings": attrs.asdict(settings),
            "share": share,
            # Every timed call must agree with the first on the same inputs, which is
            # compared with the reference (only an executor's check is the evaluator's own).
            "agree": {"table": self.config.tolerance, "atol": self.config.atol, "rtol": self.config.rtol},
            # Calls timed after the others on inputs never seen, each checked too: a forward
            # that memoises what it computed for the repeated timing inputs shows it there.
            "unseen": list(unseen),
        }
        with contextlib.ExitStack() as after:
            with self._gpu.exclusive():
                # Only an executor's (trusted) failed reply may name its finding.
                reply, failure = (_executor_call if verified else call_worker)(worker, request, self.config.run_timeout_s, "timing")
                if then is not None and failure is None and reply is not None:
                    then(reply)
                if failure is not None or reply is None:
                    return reply, failure
                try:
                    reply = validate_timed(reply, set(self.seeds.timing), frozenset(request["unseen"]))
                except ReplyError as exc:
                    failure = Finding("runtime_error", f"the timing reply is malformed: {exc}")
                deferred = share and failure is None and verified and self._compare_after_hold(reference, reply, after)
                if share and not deferred:
                    # Outputs too large to move are compared, and given back, inside the
                    # exclusive hold: a verified candidate is timed without a memory
                    # reservation (_judge_verified), so what they hold must be gone before
                    # any neighbour's GPU work starts again, unless a reservation for them
                    # was granted (_compare_after_hold). What that adds to the hold is
                    # recorded as a request of its own (the benchmarks' "worker requests").
                    self._compare_timed(worker, problem, reply if failure is None else None, verified, "exclusive hold: timed outputs compared and released")
            if deferred:
                # After the hold, with the reservation: the next candidate's timing may run
                # meanwhile, while this executor, which runs nothing until its next
                # request, keeps the outputs where they lie.
                with self._gpu.shared():
                    self._compare_timed(worker, problem, reply, verified, "after the hold: timed outputs compared and released")
        if failure is not None:
            return None, failure
        drift = judge_timed_outputs(
            problem,
            reference.trials,
            reply,
            pm=self.pm,
            tolerance_table=self.config.tolerance,
            atol=self.config.atol,
            rtol=self.config.rtol,
            unseen=frozenset(request["unseen"]),
        )
        if drift:
            return reply, drift[0]
        if reply["disagreement"]:
            return reply, Finding("state_drift", f"a timed call's output changed between calls on the same inputs: {reply['disagreement'][:400]}")
        _, unseen_slower = judge_unseen(from_json_dict(RuntimeStats, reply["stats"]))
        if unseen_slower is not None and unseen_slower.severity is Severity.ERROR:
            return reply, unseen_slower  # memoisation; a warning is the caller's (_rewarded_runtime)
        if reply.get("compute_ops"):
            ops = ", ".join(reply["compute_ops"][:8])
            message = f"torch computed in the timed calls, beyond what the trials judged ({ops}); the backend's kernels must do the work"
            if self.config.guards == "strict":
                return reply, Finding("torch_compute_in_forward", message)
            if not any(f.check == "torch_compute_in_forward" for f in findings):
                findings.append(Finding("torch_compute_in_forward", message, Severity.WARNING))
        return reply, None

    def _compare_timed(self, worker: WorkerProcess, problem: Problem, reply: dict[str, Any] | None, verified: bool, record: str) -> None:
        """Compare the timed outputs a timing reply shared (none when ``reply`` is None)
        with the reference's, on the device, then have the worker give them back; the time
        both took is recorded as a request named ``record``."""
        started = time.perf_counter()
        for timed in reply["timed_outputs"] if reply is not None else ():
            timed["comparison"] = self.references.compare_on_device(problem, timed, None, "a timed call", executor=verified)
        call_worker(worker, {"op": "release_held" if verified else "release"}, 60, "release")
        self.contention.record_request(record, time.perf_counter() - started)

    def _compare_after_hold(self, reference: ReferenceRecord, reply: dict[str, Any], after: contextlib.ExitStack) -> bool:
        """Whether a verified candidate's timed outputs, shared by its executor, may be
        compared after the exclusive hold (``eval.timed_outputs_compared=after_hold``):
        then the GPU memory they hold, and the reference's call that they are compared
        with, is reserved now, entered on ``after``. Only if granted at once: called in the
        hold, this must not wait (the lock order: a reservation before the GPU lock).
        Never for a candidate evaluated again alone, which keeps its turn to the end.

        The executor runs nothing between requests, so what it shared cannot change
        before it is compared. A problem below ``eval.large_problem_mb`` reserves nothing
        here, as in its trials: its candidate's share of the set-aside covers it."""
        if self.config.timed_outputs_compared != "after_hold" or self._running_alone():
            return False
        if not self._is_large(reference):
            return True
        trial = reference.trials[self.seeds.timing[0]]
        held = len(reply["timed_outputs"]) * sum(meta["nbytes"] for meta in trial["output_meta"])
        granted = self.memory_budget().reserve_now(held + reference.footprint_bytes)
        if granted is None:
            return False
        after.enter_context(granted)
        return True

    def _rewarded_runtime(self, runtime: RuntimeStats, findings: list[Finding]) -> RuntimeStats:
        """The time a candidate is paid for: its time on unseen inputs where that is slower
        than on the repeated timing inputs by ``judge.UNSEEN_SLOWER`` (with a warning). On
        a GPU, a runtime without one (a failed graph capture broke the random generator
        the unseen inputs are drawn with) gets ``unseen_not_timed``, a warning that keeps
        its speed out of rewards."""
        runtime, finding = judge_unseen(runtime)
        if finding is not None:
            findings.append(finding)
        if self.device != "cpu" and runtime.unseen_ms is None:
            findings.append(Finding("unseen_not_timed", f"not timed on inputs it had never seen, so memoising could not be found out: {runtime.note}", Severity.WARNING))
        return runtime

    def _baselines(self, problem: Problem, settings: TimingSettings, findings: list[Finding]) -> dict[str, RuntimeStats]:
        baselines: dict[str, RuntimeStats] = {}
        for mode in self.config.baselines:
            stats = self.references.baseline(problem, mode, findings, settings, alone=self._running_alone())
            if stats is not None:
                baselines[mode] = stats
        return baselines


#: Loads of one candidate that may defer builds before it must load (each load builds
#: what the last deferred; ``load_inline`` calls in a row defer one at a time).
MAX_BUILD_ROUNDS = 6

def _slower_on_unseen(reply: dict[str, Any], failure: Finding | None) -> bool:
    """Whether a timing was slower on unseen inputs than on the repeated ones by
    ``judge.UNSEEN_SLOWER`` or more: its validated reply says so (under
    ``judge.MEMOISED``), or its ``failure`` is ``memoisation``."""
    if failure is not None:
        return failure.check == "memoisation"
    _, finding = judge_unseen(from_json_dict(RuntimeStats, reply["stats"]))
    return finding is not None and finding.check == "unseen_inputs_slower"


def ended_for_workers_memory(result: EvalResult) -> bool:
    """Whether ``result`` failed because the kernel ended one of its workers when all of
    kz's sandboxed workers together went over ``eval.workers_memory_gb``."""
    return result.verdict is not Verdict.CORRECT and any(f.severity is Severity.ERROR and SHARED_LIMIT_ENDED in f.message for f in result.findings)


def ran_out_of_gpu_memory(result: EvalResult) -> bool:
    """Whether ``result`` failed because a GPU ran out of memory (in the candidate's
    processes or in the reference's), or was timed with a weaker clock or without a
    baseline for that reason (its graph timing, or a baseline's, fell back to events, or a
    baseline could not be timed): its findings say so."""
    timing = ("timing_fallback", "baseline")
    if any(f.check in timing and (GRAPH_OUT_OF_MEMORY in f.message or is_gpu_oom(f.message)) for f in result.findings):
        return True
    if result.verdict is Verdict.CORRECT:
        return False
    return any(f.severity is Severity.ERROR and is_gpu_oom(f.message) for f in result.findings)


#: Findings an executor (trusted) may name for a failed replay.
EXECUTOR_CHECKS = frozenset({"kernel_not_in_source", "kernel_argument", "kernel_out_of_bounds", "not_replayable"})


class _DeferredBuilds:
    """The builds one candidate's loads deferred and kz's trusted builder made, over its
    load rounds (``Evaluator._load``, ``Evaluator._evaluate_verified``)."""

    def __init__(self) -> None:
        #: Their :func:`_entry_key`: one deferred again once made is ``not_run``.
        self.made: set[str] = set()
        self.count = 0
        self.seconds = 0.0

    def make(self, evaluator: Evaluator, deferred: Any) -> Finding | None:
        """Have the builder make ``deferred`` (``Evaluator._build_deferred``); a finding
        when one cannot be made."""
        started = time.perf_counter()
        failure = evaluator._build_deferred(deferred)
        self.seconds += time.perf_counter() - started
        if failure is None:
            self.made.update(_entry_key(entry) for entry in deferred if isinstance(entry, dict))
            self.count += len(deferred)
        return failure

    def note(self, reply: dict[str, Any]) -> None:
        """Say in a load's reply what the builder made for it, if anything."""
        if self.count:
            reply["notes"].append(f"kz's trusted builder made {self.count} build(s) this candidate deferred, in {self.seconds:.1f} s, now shared")


def _deferred_too_often() -> Finding:
    return Finding("compile_error", f"the candidate deferred builds in {MAX_BUILD_ROUNDS} loads in a row and never loaded")


def _entry_key(entry: dict[str, Any]) -> str:
    """A deferred build's identity within one load: its backend and arguments."""
    return json.dumps([entry.get("backend"), entry.get("arguments")], sort_keys=True, default=repr)


def _executor_call(worker: WorkerProcess, request: dict[str, Any], timeout: float, stage: str, files: tuple[Any, ...] = ()) -> tuple[dict[str, Any] | None, Finding | None]:
    """``call_worker`` for an executor, whose failed replies may name their finding."""
    reply, failure = call_worker(worker, request, timeout, stage, files) if files else call_worker(worker, request, timeout, stage)
    if failure is not None and reply is not None and reply.get("check") in EXECUTOR_CHECKS:
        failure = Finding(reply["check"], failure.message)
    return reply, failure


def _baseline_note(baselines: dict[str, RuntimeStats]) -> str:
    return "; ".join(f"{mode}: {stats.note}" for mode, stats in baselines.items() if stats.clock != GRAPH_CLOCK) or "not captured"


def evaluate(
    problems: Iterable[Problem], candidates: Sequence[Candidate], config: EvalConfig | Any | None = None, *, journal: Journal | None = None
) -> list[EvalResult]:
    """Evaluate ``candidates`` with a temporary :class:`Evaluator` (see its documentation)."""
    with Evaluator(problems, config, journal=journal) as evaluator:
        return evaluator.evaluate(candidates)

