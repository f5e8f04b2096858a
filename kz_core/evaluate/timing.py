"""Timing a forward call: CUDA events on a GPU, wall clock on a CPU.

On a GPU each trial flushes the L2 cache (writes a buffer twice its size) and, without
waiting for the flush, records a start event and calls the function: the host's launch
overhead (a Triton launcher's Python, for one) overlaps the flush instead of landing
inside the measurement, as in ``triton.testing.do_bench``. It then records an end event on
the current stream, synchronises the whole device, and records a second end event. Work a
candidate hid on other streams finishes after the first end event and delays the second:
the gap between the two, less the host's own latency to come back from a device-wide
synchronisation (calibrated with empty trials), is added to the trial's time, so such
work stays inside the measurement. Trials continue until a time budget is spent or the
spread is small; the median and interquartile range summarise them. On a CPU the same
loop uses ``perf_counter`` and the result is labelled ``cpu``: such timings are recorded,
never turned into speedups.

Runs inside worker processes only. It times; it does not judge.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs


@attrs.frozen
class TimingSettings:
    """How long and how often to time (see ``kz_core.config.EvalConfig`` for meanings)."""

    warmup_ms: float = 25.0
    min_trials: int = 10
    max_trials: int = 1000
    budget_ms: float = 1000.0
    target_relative_iqr: float = 0.005
    l2_flush_bytes: int = 256 << 20


#: The timing procedure's version, part of the baseline cache's key: baselines timed by an
#: older procedure are timed again. 2: launches overlap the L2 flush; other streams' work
#: after the end event is measured as overhang.
TIMING_METHOD = 2
#: Empty trials that calibrate the host's synchronisation latency (see the module's doc).
CALIBRATION_TRIALS = 20


def summarize(times_ms: list[float], clock: str) -> dict[str, Any]:
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
    }


def _stable(times_ms: list[float], settings: TimingSettings) -> bool:
    if len(times_ms) < 2 * settings.min_trials:
        return False
    stats = summarize(times_ms, "")
    return stats["median_ms"] > 0 and stats["iqr_ms"] / stats["median_ms"] < settings.target_relative_iqr


def time_calls(call: Callable[[int], Any], device: str, settings: TimingSettings) -> dict[str, Any]:
    """Time ``call(i)`` for trial i = 0, 1, ...; returns :func:`summarize`'s dict.

    ``call`` receives the trial index so that the caller can alternate input sets.
    """
    if device.startswith("cuda"):
        return _time_cuda(call, device, settings)
    return _time_cpu(call, settings)


def _time_cuda(call: Callable[[int], Any], device: str, settings: TimingSettings) -> dict[str, Any]:
    import torch

    flush = torch.empty(settings.l2_flush_bytes, dtype=torch.uint8, device=device)
    started = time.perf_counter()
    index = 0
    while index < 3 or ((time.perf_counter() - started) * 1e3 < settings.warmup_ms and index < 100):
        call(index)
        torch.cuda.synchronize(device)
        index += 1
    # The host's latency from a recorded event through a device-wide synchronisation to the
    # next event, with nothing else queued: the gap an honest trial may show.
    gaps = []
    for _ in range(CALIBRATION_TRIALS):
        end, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        end.record()
        torch.cuda.synchronize(device)
        after.record()
        torch.cuda.synchronize(device)
        gaps.append(end.elapsed_time(after))
    allowed_gap = max(gaps)
    times: list[float] = []
    overhang = 0.0
    while len(times) < settings.max_trials:
        flush.zero_()
        start, end, after = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        call(index)
        end.record()
        torch.cuda.synchronize(device)
        after.record()
        torch.cuda.synchronize(device)
        late = max(0.0, end.elapsed_time(after) - allowed_gap)
        overhang = max(overhang, late)
        times.append(start.elapsed_time(end) + late)
        index += 1
        if len(times) >= settings.min_trials and (sum(times) >= settings.budget_ms or _stable(times, settings)):
            break
    del flush
    return {**summarize(times, "cuda_events"), "overhang_ms": overhang}


def _time_cpu(call: Callable[[int], Any], settings: TimingSettings) -> dict[str, Any]:
    call(0)  # warm-up: first-call compilation and caches
    times: list[float] = []
    index = 1
    while len(times) < settings.max_trials:
        start = time.perf_counter()
        call(index)
        times.append((time.perf_counter() - start) * 1e3)
        index += 1
        if len(times) >= settings.min_trials and (sum(times) >= settings.budget_ms or _stable(times, settings)):
            break
    return summarize(times, "cpu")
