"""Timing a forward call: CUDA events on a GPU, wall clock on a CPU.

On a GPU each trial flushes the L2 cache (writes a buffer twice its size), records a
start event, calls the function, synchronises the whole device (so work a candidate put
on other streams is inside the measurement), records the end event, and synchronises
again. Trials continue until a time budget is spent or the spread is small; the median
and interquartile range summarise them. On a CPU the same loop uses ``perf_counter`` and
the result is labelled ``cpu``: such timings are recorded, never turned into speedups.

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
    times: list[float] = []
    while len(times) < settings.max_trials:
        flush.zero_()
        torch.cuda.synchronize(device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        call(index)
        torch.cuda.synchronize(device)
        end.record()
        torch.cuda.synchronize(device)
        times.append(start.elapsed_time(end))
        index += 1
        if len(times) >= settings.min_trials and (sum(times) >= settings.budget_ms or _stable(times, settings)):
            break
    del flush
    return summarize(times, "cuda_events")


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
