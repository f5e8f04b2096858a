"""Where an evaluator's candidates wait: seconds spent waiting for and holding each lock.

Throughput on a GPU is bounded by what must run one at a time (timing, the reference
worker's turn, large problems); this records, per lock, how often it was taken, how long
takers waited and how long they held it, so that a benchmark can say which one is the
bottleneck (``Evaluator.contention.snapshot()``, printed by
``benchmarks/eval_throughput.py``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any


class Contention:
    """Counts, waits and holds per named lock; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats: dict[str, list[float]] = {}
        self._peaks: dict[str, int] = {}
        self._requests: dict[str, list[float]] = {}
        #: Problems' call footprints (inputs and outputs of one call), by content hash.
        self._footprints: dict[str, int] = {}
        self._ratios: dict[str, float] = {}

    def record(self, name: str, waited: float, held: float) -> None:
        with self._lock:
            entry = self._stats.setdefault(name, [0, 0.0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += waited
            entry[2] += held
            entry[3] = max(entry[3], waited)

    @contextlib.contextmanager
    def hold(self, name: str, lock: Any) -> Iterator[Any]:
        """Enter ``lock`` (a context manager; what it gives, this gives) and record the wait
        and the hold as ``name``."""
        asked = time.perf_counter()
        with lock as entered:
            got = time.perf_counter()
            try:
                yield entered
            finally:
                self.record(name, got - asked, time.perf_counter() - got)

    def note_footprint(self, problem: str, nbytes: int) -> None:
        """A problem's call footprint (what memory reservations are multiples of)."""
        with self._lock:
            self._footprints[problem] = int(nbytes)

    def record_peak(self, name: str, nbytes: int, problem: str | None = None) -> None:
        """The most GPU memory one request of kind ``name`` held (as its worker reports it);
        with ``problem`` (its content hash), also that peak in footprints of the problem,
        for problems of at least 1 GiB a call (what reservations are sized in)."""
        with self._lock:
            self._peaks[name] = max(self._peaks.get(name, 0), int(nbytes))
            footprint = self._footprints.get(problem or "", 0)
            if footprint >= 1 << 30:
                self._ratios[name] = max(self._ratios.get(name, 0.0), nbytes / footprint)

    def footprint_ratios(self) -> dict[str, float]:
        """``{"<role> <op>": footprints}``: the largest peak of a request of that kind, in
        call footprints of its problem (problems of at least 1 GiB a call)."""
        with self._lock:
            return {name: round(ratio, 2) for name, ratio in sorted(self._ratios.items())}

    def record_request(self, name: str, seconds: float) -> None:
        """One request of kind ``name`` (``"<role> <op>"``) took ``seconds`` from send to reply."""
        with self._lock:
            entry = self._requests.setdefault(name, [0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += seconds
            entry[2] = max(entry[2], seconds)

    def requests(self) -> dict[str, dict[str, float]]:
        """``{"<role> <op>": {count, total_s, max_s}}``: where the workers' time went."""
        with self._lock:
            return {name: {"count": int(n), "total_s": round(total, 3), "max_s": round(longest, 3)} for name, (n, total, longest) in sorted(self._requests.items())}

    def snapshot(self) -> dict[str, dict[str, float]]:
        """``{name: {taken, waited_s, held_s, max_wait_s}}``, names sorted."""
        with self._lock:
            return {
                name: {"taken": int(n), "waited_s": round(waited, 3), "held_s": round(held, 3), "max_wait_s": round(longest, 3)}
                for name, (n, waited, held, longest) in sorted(self._stats.items())
            }

    def peaks(self) -> dict[str, float]:
        """``{"<role> <op>": GiB}``: the most GPU memory a request of that kind held."""
        with self._lock:
            return {name: round(nbytes / (1 << 30), 2) for name, nbytes in sorted(self._peaks.items())}

    def reset(self) -> None:
        with self._lock:
            self._stats.clear()
            self._peaks.clear()
            self._requests.clear()
            self._ratios.clear()
