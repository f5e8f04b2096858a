"""Timing a forward call: CUDA graph replays or CUDA events on a GPU, wall clock on a CPU.

Two methods on a GPU (``eval.timing_method``):

``graph`` (the default)
    The forward calls are captured once into a CUDA graph and the graph is replayed. A
    timed trial flushes the L2 cache (writes a buffer larger than it), records a start
    event, replays the graph and records an end event, all without waiting on the host,
    so the time is the GPU's alone: no Python launcher, no host synchronisation latency.
    The graph holds an even number of calls alternating over the two timing input sets;
    when one pair of calls takes less than ``replay_ms``, more calls go into the graph,
    each on its own copy of the inputs (up to ``INPUT_BYTES`` of copies), so that inputs
    are read from memory, not from the L2 cache (parameters small enough may stay in it).
    A trial's time is the replay's divided by its calls.

    The calls are warmed up and captured on *decoy* inputs (other secret seeds); only then
    are the timing inputs copied into the captured buffers. The first call's output on
    each input set is returned for checking against the reference, so a graph that replays
    stale work (a result computed at capture time, on the side, or looked up by buffer
    address) gives the decoys' answer and fails the check. Every other call's output is
    kept apart (no call's output memory is reused by another) and, after the last replay,
    compared with its input set's first call (``agree``): a kernel that works on some calls
    only (a call counter in a buffer of its own, the calls it guesses are checked) leaves
    the others wrong and is found out. Before every replay, outside its events, every kept
    output is poisoned (NaN; a secret value for integers), so that a call skipped in the
    last replay cannot pass with what it wrote in an earlier one. Keeping every output
    bounds the calls by ``KEPT_BYTES`` of outputs. A forward that returns a buffer it
    keeps has its output copied (inside the graph) on each input set's first call and on
    ``COPIED_CALLS`` calls drawn at random, secretly, for every capture.

    The timed replays repeat two input sets, so a forward that recognises inputs it has
    seen (a fingerprint of a few elements) and returns what it computed for them would be
    timed copying, not computing. After the timed replays come ``UNSEEN_REPLAYS`` more, in
    which every call reads inputs drawn for it alone (``unseen`` seeds on a few calls drawn
    secretly, whose outputs the caller checks against the reference, throwaway seeds on
    the others): the fastest is ``stats["unseen_ms"]`` (per call), which the evaluator
    compares with the median.

    A forward that cannot be captured (it synchronises, reads a value back to the host,
    allocates pinned memory, ...) or whose non-tensor inputs vary between seeds is timed
    with ``events`` instead, and its stats say why (``note``). A failed capture leaves
    torch's default CUDA generator unusable in the process, so the timing inputs are
    drawn before any capture, and :attr:`Timed.dirty` asks for the worker's replacement.
    So is a forward that draws random numbers (torch's generators, Python's or NumPy's
    move in its warm-up): a graph's draws advance on every replay, where each timed call
    must draw what the reference drew on the same inputs.

``events``
    Each trial flushes the L2 cache, records a start event, calls the function,
    synchronises the whole device (so work a candidate put on other streams is inside the
    measurement), records the end event, and synchronises again. The host's launch and
    synchronisation latency is inside every trial: tens of microseconds that dominate
    small kernels. After each trial (outside its events) its output is compared with the
    first timed call's on the same input set (``agree``), and the trial before it on that
    set is poisoned before its memory is freed, so that a call that writes nothing does
    not return an earlier call's answer from reused memory. One more trial on the inputs
    of each ``unseen`` seed gives ``stats["unseen_ms"]`` (the fastest). A forward that
    draws random numbers (found on its first call) gets, before each call, the generators'
    states that drawing its input set left: the reference's call on those inputs drew from
    there, so an honest forward's timed outputs are the reference's.

Trials continue until a time budget is spent or the spread is small; the median and
interquartile range summarise them. On a CPU the loop uses ``perf_counter`` and the
result is labelled ``cpu``: such timings are recorded, never turned into speedups.

Runs inside worker processes only. It times; it does not judge.
"""

from __future__ import annotations

import gc
import math
import secrets
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

#: Stats ``clock`` values.
GRAPH_CLOCK = "cuda_graph"
EVENTS_CLOCK = "cuda_events"
CPU_CLOCK = "cpu"
#: How a graph timing that ran the GPU out of memory says so in its note (it was timed
#: with events instead): the evaluator evaluates such a candidate again with the GPU's
#: memory to itself, since its neighbours' memory may be what was missing.
GRAPH_OUT_OF_MEMORY = "out of GPU memory for graph timing"

#: Trials enqueued between two host synchronisations in graph timing.
_CHUNK = 10

#: Bytes of outputs a graph keeps (every call's): more calls than fit are not captured.
KEPT_BYTES = 1 << 30

#: Calls (besides each input set's first) whose outputs are copied out of a buffer the
#: forward keeps, in graph timing: drawn at random for every capture.
COPIED_CALLS = 6

#: Bytes of input buffers a graph may hold: every call reads a buffer of its own, so that
#: its calls can also be replayed, each on inputs never seen before (``unseen``).
INPUT_BYTES = 512 << 20

#: Replays on unseen inputs after the timed ones (graph timing): the ``unseen`` seeds are
#: shared out among them; their other calls read inputs of throwaway seeds.
UNSEEN_REPLAYS = 2

#: What a timing's note says when its calls could not be timed on unseen inputs.
NOT_TIMED_UNSEEN = "not timed on unseen inputs"
#: Why a forward that draws random numbers is timed with events: a graph's draws advance on
#: every replay, where each timed call must draw what the reference drew on its inputs.
DRAWS_RANDOM = "its forward draws random numbers, which each timed call must draw as the reference did on its inputs"


@attrs.frozen
class TimingSettings:
    """How long and how often to time (see ``kz_core.config.EvalConfig`` for meanings)."""

    warmup_ms: float = 25.0
    min_trials: int = 10
    max_trials: int = 1000
    budget_ms: float = 1000.0
    target_relative_iqr: float = 0.005
    l2_flush_bytes: int = 256 << 20
    method: str = "graph"
    replay_ms: float = 1.0
    max_calls_per_replay: int = 512


class GraphUnavailable(Exception):
    """The forward call cannot be timed as a CUDA graph (the message says why).

    :ivar dirty: a capture was begun and failed, which leaves torch's default CUDA
        generator unusable in this process ("Offset increment outside graph capture").
    """

    def __init__(self, message: str, dirty: bool = False):
        super().__init__(message)
        self.dirty = dirty


@attrs.define
class Timed:
    """What :func:`time_forward` measured.

    :ivar stats: :func:`summarize`'s dict.
    :ivar outputs: ``(seed, output)`` of timed calls, at least one per timing seed, for
        the caller to check against the reference.
    :ivar torch_ops: aten ops the forward called while it was captured (graph timing
        with ``record_ops``): a forward that computes with torch only when captured shows
        here what it hid from the correctness trials' profiler.
    :ivar dirty: a graph capture failed in this process; it must not serve another
        request that draws random inputs (the worker is replaced).
    :ivar disagreement: why a timed call's output differed from the first timed call's
        on the same inputs (``""`` when every checked call agreed, or nothing checked).
    :ivar phases: host seconds of the timing's parts (:class:`Laps`; diagnostics, never a
        verdict: ``benchmarks/eval_throughput.py`` prints them per request kind).
    """

    stats: dict[str, Any]
    outputs: list[tuple[int, Any]]
    torch_ops: list[str] = attrs.field(factory=list)
    dirty: bool = False
    disagreement: str = ""
    phases: dict[str, float] = attrs.field(factory=dict)


class Laps:
    """Host seconds of a request's parts, each from the end of the part before:
    ``laps("inputs")`` ends the part so named. Diagnostics for the throughput benchmark
    (a reply's ``phases``, ``Contention.requests``), never a verdict."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._clock = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self._clock
        self._clock = now

    def restart(self) -> None:
        """The next part starts now: the time since the last part counts in none."""
        self._clock = time.perf_counter()


def summarize(times_ms: list[float], clock: str, calls_per_trial: int = 1, note: str = "") -> dict[str, Any]:
    ordered = sorted(times_ms)
    if len(ordered) >= 4:
        quartiles = statistics.quantiles(ordered, n=4, method="inclusive")
        iqr = quartiles[2] - quartiles[0]
    else:
        iqr = ordered[-1] - ordered[0]
    return {
        "median_ms": statistics.median(ordered),
        "iqr_ms": iqr,
        "min_ms": ordered[0],
        "trials": len(ordered),
        "clock": clock,
        "calls_per_trial": calls_per_trial,
        "note": note,
    }


def _stable(times_ms: list[float], settings: TimingSettings) -> bool:
    if len(times_ms) < 2 * settings.min_trials:
        return False
    stats = summarize(times_ms, "")
    return stats["median_ms"] > 0 and stats["iqr_ms"] / stats["median_ms"] < settings.target_relative_iqr


def _done(times_ms: list[float], measured_ms: float, settings: TimingSettings) -> bool:
    return len(times_ms) >= settings.max_trials or (
        len(times_ms) >= settings.min_trials and (measured_ms >= settings.budget_ms or _stable(times_ms, settings))
    )


def time_calls(
    call: Callable[[int], Any], device: str, settings: TimingSettings, after: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Time ``call(i)`` for trial i = 0, 1, ... with events (GPU) or the wall clock (CPU);
    returns :func:`summarize`'s dict.

    ``call`` receives the trial index so that the caller can alternate input sets;
    ``after(i)``, on a GPU, runs after trial i's time is taken, outside it.
    """
    if device.startswith("cuda"):
        return _time_cuda(call, device, settings, after)
    return _time_cpu(call, settings)


def time_forward(
    forward: Callable[..., Any],
    make_inputs: Callable[[int], list[Any]],
    seeds: Sequence[int],
    decoys: Sequence[int],
    device: str,
    settings: TimingSettings,
    record_ops: bool = False,
    agree: Any = None,
    unseen: Sequence[int] = (),
) -> Timed:
    """Time ``forward(*make_inputs(seed))`` over the timing ``seeds`` (two, alternating).

    :param decoys: two seeds whose inputs a CUDA graph is warmed up and captured on.
    :param record_ops: record the aten ops the forward calls while it is captured.
    :param agree: on a GPU, a ``correctness.Agreement``: ``agree(first, later)`` says why
        a timed call's output ``later`` differs from the first timed call's on the same
        input set (``""`` when it does not); every timed call is checked with it and the
        first disagreement is :attr:`Timed.disagreement`.
    :param unseen: on a GPU, seeds of inputs the forward has never seen, for calls timed
        after the timed trials (graph replays in which every call reads inputs of its own;
        events trials each on a set of its own): their time is ``stats["unseen_ms"]`` and
        their outputs join :attr:`Timed.outputs`, for the caller to check. A forward
        faster on inputs it has seen (it memoises) shows it there.
    """
    laps = Laps()

    def draw() -> tuple[list[list[Any]], list[tuple[Any, ...]]]:
        """Each seed's inputs, and the generators' states their draw left (what the
        reference's call on them drew from)."""
        sets, states = [], []
        for seed in seeds:
            sets.append(make_inputs(seed))
            states.append(_generator_states(device))
        return sets, states

    # The timing inputs are drawn first: a failed capture leaves torch's default CUDA
    # generator unusable in this process (the fallback must not draw again).
    input_sets, drawn = draw()
    laps("inputs")
    note = ""
    dirty = False
    if device.startswith("cuda") and settings.method == "graph":
        import torch

        try:
            return _time_graph(forward, make_inputs, input_sets, seeds, decoys, device, settings, record_ops, agree, unseen, laps)
        except GraphUnavailable as exc:
            note, dirty = f"timed with CUDA events: {exc}", exc.dirty
        except torch.OutOfMemoryError:
            note = f"timed with CUDA events: {GRAPH_OUT_OF_MEMORY}"
        _release(device)
        if not input_sets:
            # The graph had taken the timing inputs into its buffers and dropped them
            # (_time_graph): drawn again, which a successful capture leaves possible.
            input_sets, drawn = draw()
        laps("capture")
    last: dict[int, Any] = {}
    first: dict[int, Any] = {}
    held: dict[int, Any] = {}
    disagreement: list[str] = []
    poison = secrets.randbits(31)
    # Whether the forward draws random numbers, found on the first call (a warm-up): from
    # then on each call draws from the generators as its inputs' draw left them, as the
    # reference's did (host work of microseconds, inside an events trial's time).
    draws = False

    def call(index: int) -> None:
        nonlocal draws
        which = index % len(input_sets)
        if draws:
            _set_generator_states(drawn[which], device)
        before = _generator_states(device) if index == 0 else None
        last[which] = forward(*input_sets[which])
        if before is not None and not _same_generator_states(before, _generator_states(device)):
            draws = True
            # Once more as the reference drew (a warm-up's output may be its set's last).
            _set_generator_states(drawn[which], device)
            last[which] = forward(*input_sets[which])

    def after(index: int) -> None:
        which = index % len(input_sets)
        if which not in first:
            first[which] = _copied(last[which])
        elif not disagreement:
            why = agree(first[which], last[which])
            if why:
                disagreement.append(f"timed call {index + 1} (input set {which + 1}) differs from the first on the same inputs: {why}")
        if which in held:
            _poison(held[which], poison, [*input_sets, *last.values()])
        held[which] = last[which]

    stats = time_calls(call, device, settings, after if agree is not None else None)
    laps("timed calls")
    stats["note"] = note
    first.clear()
    held.clear()
    outputs = [(seed, last[which]) for which, seed in enumerate(seeds) if which in last]
    if any(_overlapping(later, [output for _, output in outputs[:index]]) for index, (_, later) in enumerate(outputs)):
        # The forward returns a buffer it keeps (every set's last output is the same memory):
        # one more call per set, untimed, each output copied before the next call.
        outputs = []
        for which, seed in enumerate(seeds):
            if draws:
                _set_generator_states(drawn[which], device)
            outputs.append((seed, _copied(forward(*input_sets[which]))))
    if unseen and device.startswith("cuda"):
        outputs = [(seed, _copied(output)) for seed, output in outputs]
        # The timing inputs and what the timed calls returned go back to the allocator
        # before the unseen calls, whose outputs and workspaces can then come from its cache
        # as theirs did, not from a GPU that other workers may have filled meanwhile (a
        # cudaMalloc in the trial, or a convolution's slower algorithm when its workspace is
        # refused). On the H200 an honest reference was 5.2 times slower on unseen inputs
        # with events timing, once; whether this was its cause is not yet measured.
        last.clear()
        input_sets.clear()
        try:
            unseen_ms, checked = _call_unseen(forward, make_inputs, unseen, device, settings)
        except Exception as exc:  # noqa: BLE001 - after a failed capture, torch cannot draw inputs here
            if not dirty:
                raise
            stats["note"] = f"{note}; {NOT_TIMED_UNSEEN}: {_first_line(exc)}"
        else:
            stats["unseen_ms"] = unseen_ms
            outputs += checked
        laps("unseen calls")
    return Timed(stats, outputs, dirty=dirty, disagreement="".join(disagreement), phases=laps.phases)


def _generator_states(device: str) -> tuple[Any, ...]:
    """The states of the random generators a forward may draw from (torch's on the CPU and
    on ``device``, Python's, NumPy's): the trials seed them all before drawing a seed's
    inputs, and the reference's call on those inputs draws from where that left them."""
    import random

    import numpy
    import torch

    cuda = None
    if device.startswith("cuda"):
        try:
            cuda = torch.cuda.get_rng_state(device)
        except Exception:  # noqa: BLE001 - a failed capture's generator: not drawn from again here
            pass
    return (torch.get_rng_state(), cuda, random.getstate(), numpy.random.get_state())


def _set_generator_states(states: tuple[Any, ...], device: str) -> None:
    import random

    import numpy
    import torch

    cpu, cuda, python, numpy_state = states
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state(cuda, device)
    random.setstate(python)
    numpy.random.set_state(numpy_state)


def _same_generator_states(first: tuple[Any, ...], second: tuple[Any, ...]) -> bool:
    import numpy
    import torch

    return (
        torch.equal(first[0], second[0])
        and (first[1] is None) == (second[1] is None)
        and (first[1] is None or torch.equal(first[1], second[1]))
        and first[2] == second[2]
        and all(numpy.array_equal(a, b) for a, b in zip(first[3], second[3]))
    )


def _call_unseen(
    forward: Callable[..., Any], make_inputs: Callable[[int], list[Any]], unseen: Sequence[int], device: str, settings: TimingSettings
) -> tuple[float, list[tuple[int, Any]]]:
    """Events trials after the timed ones (:func:`_events_trial`), each on the inputs of
    one ``unseen`` seed: the fastest trial's milliseconds and ``(seed, output)`` of each,
    copied."""
    import torch

    flush = torch.empty(settings.l2_flush_bytes, dtype=torch.uint8, device=device)
    times: list[float] = []
    checked: list[tuple[int, Any]] = []
    for seed in unseen:
        inputs = make_inputs(seed)
        elapsed, output = _events_trial(lambda: forward(*inputs), flush, device)
        times.append(elapsed)
        checked.append((seed, _copied(output)))
        del inputs, output
    return min(times), checked


def _overlapping(value: Any, kept: list[Any]) -> bool:
    """Whether a tensor of ``value`` shares memory with a tensor of ``kept``."""
    from kz_core.evaluate.execution import storages_overlap, tensor_leaves

    earlier = [t for item in kept for t in tensor_leaves(item)]
    return any(storages_overlap(t, e) for t in tensor_leaves(value) for e in earlier)


def _copied(value: Any) -> Any:
    """``value`` with every tensor in it (through lists, tuples and dicts) copied: what a
    forward returned, kept apart from a buffer it rewrites on its next call; a graph's
    extra input buffers."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(x) for x in value)
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    return value


def plan_replay(pair_ms: float, set_bytes: int, settings: TimingSettings) -> int:
    """How many calls a graph replays, each on an input buffer of its own (call j reads
    buffer j, which holds input set ``j % 2`` in the timed replays).

    :param pair_ms: GPU time of one call on each of the two input sets.
    :param set_bytes: bytes of one input set's tensors.
    :returns: an even number of calls: enough to take ``settings.replay_ms`` where that
        allows, their buffers within ``INPUT_BYTES`` (or two calls).
    """
    limit = max(2, settings.max_calls_per_replay - settings.max_calls_per_replay % 2)
    if pair_ms * limit / 2 <= settings.replay_ms:  # even the most calls are short enough
        calls = limit
    else:
        calls = min(limit, 2 * max(1, math.ceil(settings.replay_ms / pair_ms)))
    most = max(2, INPUT_BYTES // max(1, set_bytes))
    return min(calls, most - most % 2)


def _warm_up(step: Callable[[int], Any], device: str, settings: TimingSettings, minimum: int, warmed_ms: float = 0.0) -> int:
    """Run ``step(i)`` (synchronised) at least ``minimum`` times and for ``warmup_ms``
    less ``warmed_ms`` (work of the same kind that ran just before), at most 100 times;
    returns how many ran."""
    import torch

    started = time.perf_counter()
    index = 0
    while index < minimum or ((time.perf_counter() - started) * 1e3 + warmed_ms < settings.warmup_ms and index < 100):
        step(index)
        torch.cuda.synchronize(device)
        index += 1
    return index


def _time_cuda(call: Callable[[int], Any], device: str, settings: TimingSettings, after: Callable[[int], None] | None = None) -> dict[str, Any]:
    import torch

    flush = torch.empty(settings.l2_flush_bytes, dtype=torch.uint8, device=device)
    index = _warm_up(call, device, settings, minimum=3)
    times: list[float] = []
    while not _done(times, sum(times), settings):
        elapsed, _ = _events_trial(lambda: call(index), flush, device)
        times.append(elapsed)
        if after is not None:
            after(index)
        index += 1
    del flush
    return summarize(times, EVENTS_CLOCK)


def _events_trial(call: Callable[[], Any], flush: Any, device: str) -> tuple[float, Any]:
    """One events trial: the L2 cache flushed, ``call()`` between two events with the whole
    device synchronised before the end one (work on other streams counts); its
    milliseconds and what it returned."""
    import torch

    flush.zero_()
    torch.cuda.synchronize(device)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    returned = call()
    torch.cuda.synchronize(device)
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end), returned


def _time_cpu(call: Callable[[int], Any], settings: TimingSettings) -> dict[str, Any]:
    call(0)  # warm-up: first-call compilation and caches
    times: list[float] = []
    index = 1
    while not _done(times, sum(times), settings):
        start = time.perf_counter()
        call(index)
        times.append((time.perf_counter() - start) * 1e3)
        index += 1
    return summarize(times, CPU_CLOCK)


# -- CUDA graphs --------------------------------------------------------------------------


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value, key=repr) for leaf in _leaves(value[key])]
    return [value]


def _signature(value: Any) -> Any:
    """What must not change between the inputs a graph was captured on and those it replays."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), tuple(value.stride()), value.dtype, str(value.device), value.storage_offset())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_signature(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((repr(key), _signature(value[key])) for key in sorted(value, key=repr)))
    return ("value", repr(value))


def _tensor_bytes(values: list[Any]) -> int:
    import torch

    return sum(x.untyped_storage().nbytes() for x in _leaves(values) if isinstance(x, torch.Tensor))


def _copy_into(buffers: list[Any], values: list[Any]) -> None:
    import torch

    for target, source in zip(_leaves(buffers), _leaves(values)):
        if isinstance(target, torch.Tensor):
            target.copy_(source)


def _release(device: str) -> None:
    import torch

    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()


def _op_recorder(names: list[str]) -> Any:
    """A dispatch mode that appends the name of every aten op called under it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from kz_core.evaluate.recording import without_dynamo_import

    @without_dynamo_import
    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            names.append(func._schema.name)
            return func(*args, **(kwargs or {}))

    return Recorder()


def _capture(
    forward: Callable[..., Any], buffers: list[list[Any]], calls: int, keep: set[int], device: str, ops: list[str] | None, copy_kept: bool = False
) -> tuple[Any, dict[int, Any]]:
    """A graph of ``calls`` forward calls, call j on ``buffers[j % len(buffers)]``; the
    outputs of the calls in ``keep`` are kept (copied, with ``copy_kept``)."""
    import contextlib

    import torch

    graph = torch.cuda.CUDAGraph()
    kept: dict[int, Any] = {}
    try:
        with torch.cuda.graph(graph):
            for j in range(calls):
                with _op_recorder(ops) if ops is not None else contextlib.nullcontext():
                    output = forward(*buffers[j % len(buffers)])
                if j in keep:
                    # A buffer the forward keeps and returns every call is copied (the copy
                    # is captured too) so that each kept call's value survives the next.
                    kept[j] = _copied(output) if copy_kept else output
                del output
    except Exception as exc:  # noqa: BLE001 - anything the forward or the capture raised
        kept.clear()
        del graph
        _check_context(device)
        raise GraphUnavailable(f"capturing it in a CUDA graph failed: {_first_line(exc)}", dirty=True) from exc
    return graph, kept


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _check_context(device: str) -> None:
    """A failed capture must leave the device usable; re-raise what killed it otherwise.

    The first attempt may meet the failed capture's error once more (CUDA reports a
    non-sticky error to the next call that asks); a dead context fails both.
    """
    import torch

    for attempt in range(2):
        try:
            torch.cuda.synchronize(device)
            torch.zeros(1, device=device).add_(1).item()
            return
        except Exception:  # noqa: BLE001
            if attempt:
                raise


def _replays_ms(graph: Any, flush: Any, device: str, replays: int, poison: Any = None) -> list[float]:
    """GPU milliseconds of ``replays`` replays, each after ``poison`` (a graph that
    poisons the kept outputs) and an L2 flush, enqueued together and synchronised once (the
    flush in front of each keeps the GPU busy while the host launches the graph, so the
    host's latency stays outside the events)."""
    import torch

    pending = []
    for _ in range(replays):
        if poison is not None:
            poison.replay()
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        pending.append((start, end))
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) for start, end in pending]


#: A two-call graph's first replay taking at least this many times ``replay_ms`` decides
#: how many calls a replay holds (two, ``plan_replay``) without further replays: a first
#: replay is slower than later ones if anything, and only a later pair shorter than
#: ``replay_ms`` would have asked for more calls.
PAIR_DECIDED = 2.0


def _pair_ms(graph: Any, flush: Any, device: str, settings: TimingSettings) -> tuple[float, float]:
    """GPU milliseconds of one replay of the two-call graph, for ``plan_replay``, and the
    milliseconds its replays took (warming up what is replayed next).

    The first replay is timed too. Where it takes ``PAIR_DECIDED`` times ``replay_ms``, it
    alone decides: at KernelBench level 1's published sizes nearly every call takes
    milliseconds, and the five more replays ran ten such calls that decided nothing,
    while the GPU was held exclusive for timing. Otherwise the pair's time is the median
    of five replays after that first one."""
    first = _replays_ms(graph, flush, device, 1)[0]
    if first >= PAIR_DECIDED * settings.replay_ms:
        return first, first
    replays = _replays_ms(graph, flush, device, 5)
    return statistics.median(replays), first + sum(replays)


def _time_graph(
    forward: Callable[..., Any],
    make_inputs: Callable[[int], list[Any]],
    input_sets: list[list[Any]],
    seeds: Sequence[int],
    decoys: Sequence[int],
    device: str,
    settings: TimingSettings,
    record_ops: bool,
    agree: Any,
    unseen: Sequence[int],
    laps: Laps,
) -> Timed:
    import torch

    if len(seeds) != 2 or len(decoys) != 2:
        raise ValueError("graph timing needs two timing seeds and two decoy seeds")
    signature = _signature(input_sets[0])
    buffers = [make_inputs(seed) for seed in decoys]
    if any(_signature(values) != signature for values in [*input_sets, *buffers]):
        raise GraphUnavailable("its inputs' shapes or non-tensor values vary between seeds")
    if not any(isinstance(x, torch.Tensor) and x.is_cuda for x in _leaves(buffers[0])):
        raise GraphUnavailable("it has no GPU tensor input")
    # Warm-up on a side stream, as CUDA graph capture wants (lazy initialisation, Triton's
    # compilation and autotuning, cuBLAS workspaces happen here, not in the capture).
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    generators = _generator_states(device)
    # Whether the forward returns memory it keeps (an output buffer allocated once): one
    # call's output is held until the next returns, so that the allocator cannot hand the
    # same block to an honest forward's next output.
    keeps_output = False
    output_bytes = 0
    try:
        with torch.cuda.stream(side):
            previous = None
            for _ in range(2):
                for inputs in buffers:
                    output = forward(*inputs)
                    keeps_output = keeps_output or (previous is not None and _overlapping(output, [previous]))
                    output_bytes = max(output_bytes, _tensor_bytes([output]))
                    previous = output
                    del output
            del previous
        torch.cuda.current_stream(device).wait_stream(side)
        torch.cuda.synchronize(device)
    except Exception as exc:  # noqa: BLE001 - it ran on the default stream, not on another
        _check_context(device)
        raise GraphUnavailable(f"it failed on a stream other than the default one: {_first_line(exc)}") from exc
    if not _same_generator_states(generators, _generator_states(device)):
        raise GraphUnavailable(DRAWS_RANDOM)

    ops: list[str] | None = [] if record_ops else None
    graph, kept = _capture(forward, buffers, 2, {0, 1}, device, ops, copy_kept=keeps_output)
    flush = torch.empty(settings.l2_flush_bytes, dtype=torch.uint8, device=device)
    pair_ms, warmed_ms = _pair_ms(graph, flush, device, settings)
    calls = plan_replay(pair_ms, _tensor_bytes(buffers[0]), settings)
    if not keeps_output:
        calls = _within_kept_bytes(calls, output_bytes)
    if calls > 2:
        warmed_ms = 0.0  # a graph of its own, never replayed yet
        del graph, kept
        buffers += [_copied(buffers[b % 2]) for b in range(2, calls)]
        if keeps_output:  # its outputs are copied inside the graph: on a few calls, secretly drawn
            keep = {0, 1, *secrets.SystemRandom().sample(range(2, calls), min(COPIED_CALLS, calls - 2))}
        else:  # every call's own output, none reusing another's memory
            keep = set(range(calls))
        graph, kept = _capture(forward, buffers, calls, keep, device, ops, copy_kept=keeps_output)
    # The timing inputs go into the captured buffers only now: the forward never saw them.
    for which, values in enumerate(input_sets):
        for b in range(which, calls, 2):
            _copy_into(buffers[b], values)
    torch.cuda.synchronize(device)
    # From here on they live in the buffers only: their own copies go back to the
    # allocator, for the copies of the timed outputs and the unseen inputs drawn below (a
    # large problem's two sets are as large as its inputs twice over; the loop's last set
    # too, which its variable kept). The caller draws them again if the graph fails after
    # this; the capture has succeeded, so it can.
    input_sets.clear()
    del values
    laps("capture")

    # A graph replayed already (the two-call one) needs less warming up: once on the
    # timing inputs, and for what is left of ``warmup_ms``.
    _warm_up(lambda _: graph.replay(), device, settings, minimum=1 if warmed_ms else 2, warmed_ms=warmed_ms)
    poison = _poisoning(kept, buffers, device) if agree is not None else None
    laps("warm-up replays")
    times: list[float] = []
    measured = 0.0
    while not _done(times, measured, settings):
        replays = _replays_ms(graph, flush, device, min(_CHUNK, settings.max_trials - len(times)), poison)
        measured += sum(replays)
        times += [elapsed / calls for elapsed in replays]
    laps("timed replays")
    disagreement = ""
    later = [j for j in sorted(kept) if j >= 2]
    index, why = agree.first_disagreement([(kept[j % 2], kept[j]) for j in later]) if agree is not None else (-1, "")
    if why:
        j = later[index]
        disagreement = f"call {j + 1} of the {calls} in a replayed graph (input set {j % 2 + 1}) differs from the first on the same inputs: {why}"
    laps("agreement")
    stats = summarize(times, GRAPH_CLOCK, calls)
    if not unseen:
        return Timed(stats, [(seeds[j], kept[j]) for j in (0, 1)], sorted(set(ops or [])), disagreement=disagreement, phases=laps.phases)
    outputs = [(seeds[j], _copied(kept[j])) for j in (0, 1)]  # the unseen replays write over them
    unseen_ms, checked = _replay_unseen(graph, flush, poison, buffers, kept, make_inputs, unseen, device)
    stats["unseen_ms"] = unseen_ms / calls
    laps("unseen replays")
    return Timed(stats, outputs + checked, sorted(set(ops or [])), disagreement=disagreement, phases=laps.phases)


def _replay_unseen(
    graph: Any, flush: Any, poison: Any, buffers: list[list[Any]], kept: dict[int, Any], make_inputs: Callable[[int], list[Any]], unseen: Sequence[int], device: str
) -> tuple[float, list[tuple[int, Any]]]:
    """``UNSEEN_REPLAYS`` more replays, every call on inputs drawn for it alone (call j
    reads buffer j): the ``unseen`` seeds' inputs go to calls drawn secretly among those
    whose outputs are kept, every other call's come from a throwaway seed. A forward that
    returns what it computed for inputs seen before (a fingerprint of a few elements, a
    table in a buffer of its own) must compute here.

    :returns: the fastest such replay's milliseconds, and ``(seed, output)`` for each
        ``unseen`` seed, for the caller to check against the reference (a forward that
        writes anything fast on inputs it has not seen is found out there).
    """
    import torch

    draw = secrets.SystemRandom()
    share = max(1, len(unseen) // UNSEEN_REPLAYS)
    times: list[float] = []
    checked: list[tuple[int, Any]] = []
    for replay in range(UNSEEN_REPLAYS):
        mine = list(unseen[replay * share : (replay + 1) * share])[: len(kept)]
        if not mine:
            break
        placed = dict(zip(draw.sample(sorted(kept), len(mine)), mine))
        for b, values in enumerate(buffers):
            fresh = make_inputs(placed.get(b, secrets.randbits(62)))
            _copy_into(values, fresh)
            del fresh
        torch.cuda.synchronize(device)
        times += _replays_ms(graph, flush, device, 1, poison)
        last = replay == UNSEEN_REPLAYS - 1  # nothing writes over the last replay's outputs
        checked += [(seed, kept[j] if last else _copied(kept[j])) for j, seed in placed.items()]
    return min(times), checked


def _poison(value: Any, secret: int, spare: list[Any]) -> None:
    """Overwrite every tensor of ``value`` that shares no memory with ``spare`` (the
    inputs): NaN where it holds floating-point numbers, else ``secret`` (within the
    dtype's positive range; booleans get its lowest bit)."""
    import torch

    for leaf in _leaves(value):
        if isinstance(leaf, torch.Tensor) and leaf.numel() and not _overlapping(leaf, spare):
            if leaf.dtype.is_floating_point or leaf.dtype.is_complex:
                leaf.fill_(float("nan"))
            elif leaf.dtype == torch.bool:
                leaf.fill_(bool(secret & 1))
            else:
                leaf.fill_(secret % (1 << (8 * leaf.element_size() - 1)))


def _poisoning(kept: dict[int, Any], spare: list[Any], device: str) -> Any:
    """A CUDA graph that poisons (:func:`_poison`) every output ``kept``, replayed before
    each timed replay: a call must write its output in the last replay, not in an earlier."""
    import torch

    secret = secrets.randbits(31)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in sorted(kept):
            _poison(kept[j], secret, spare)
    torch.cuda.synchronize(device)
    return graph


def _within_kept_bytes(calls: int, output_bytes: int) -> int:
    """``plan_replay``'s ``calls``, fewer (and even) where keeping every call's output
    would take more than ``KEPT_BYTES``."""
    if calls * output_bytes <= KEPT_BYTES:
        return calls
    limit = max(2, KEPT_BYTES // max(1, output_bytes))
    return limit - limit % 2
