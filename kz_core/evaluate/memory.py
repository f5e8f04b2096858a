"""A GPU's memory, shared out between the candidates in flight.

KernelBench's level 1 has problems whose one call moves 6 to 17 GB; several of them
recorded, replayed, compared and timed at once by separate processes ran an H200's 141 GB
out of memory, and honest kernels failed with ``CUDA out of memory``. A candidate reserves
a multiple of its problem's call footprint (inputs and outputs, from the reference) while
it is recorded, and again while it is replayed, compared and timed; a problem's first
reference computation reserves twice the footprint its reference worker finds on torch's
``meta`` device (shapes without memory), or a fixed share where the problem cannot run
there. Reservations
are granted first come, first served, and one larger than the whole budget is granted when
nothing else is held; with ``overtakes`` (``eval.reservation_overtakes``), a later request
that fits may go before earlier ones that do not fit yet, each of which can be passed so
many times before it blocks everyone behind it (so a large request is delayed a bounded
number of times, never starved). The budget is an estimate, so a candidate that runs out
of GPU memory anyway is evaluated once more with the whole budget to itself.

Candidates of smaller problems reserve nothing: a share of the GPU is set aside for them
instead (``set_aside``), out of reach of the reservations. The evaluator may shrink it
while its candidates in flight are of large problems, which reserve what they use
(``eval.reservation_set_aside``).

Lock order: a reservation is taken before the GPU lock and any worker, never while holding
them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from kz_core.evaluate.contention import Contention

#: The share of the budget a problem's first reference computation reserves when its
#: footprint cannot be found on the meta device (KernelBench's largest call has 17 GB of
#: inputs).
FIRST_REFERENCE_SHARE = 0.4


#: How torch reports a GPU that ran out of memory (``torch.OutOfMemoryError``).
GPU_OOM = ("CUDA out of memory", "OutOfMemoryError")


def is_gpu_oom(text: str) -> bool:
    """Whether an error message says a GPU ran out of memory."""
    return any(marker in text for marker in GPU_OOM)


class MemoryBudget:
    """Bytes of one GPU's memory, reserved first come, first served.

    :param capacity: the bytes candidates may reserve (0: no budget, every reservation
        is granted at once; on a CPU).
    :param overtakes: how many later requests may be granted before a waiting one (0:
        strictly in order).
    :param set_aside: bytes of ``capacity`` reservations may not take (the share of
        candidates that reserve nothing); :meth:`set_aside` changes it.
    """

    def __init__(self, capacity: int, contention: Contention | None = None, overtakes: int = 0, set_aside: int = 0):
        self._total = max(0, int(capacity))
        self._set_aside = max(0, int(set_aside))
        self.overtakes = max(0, int(overtakes))
        self._contention = contention
        self._condition = threading.Condition()
        self._used = 0
        self._queue: list[list[int]] = []  # [ticket, times passed] of the requests waiting, in order
        self._tickets = 0
        self._byte_seconds = 0.0

    @property
    def byte_seconds(self) -> float:
        """Bytes times seconds of every reservation given back so far. Divided by the
        capacity: the shortest time the reservations made so far could have taken, packed
        perfectly (what bounds a batch whose large problems wait for memory)."""
        with self._condition:
            return self._byte_seconds

    @property
    def used(self) -> int:
        with self._condition:
            return self._used

    @property
    def capacity(self) -> int:
        """The bytes reservations may take now: the whole less what is set aside, never
        below 1 GiB (0: no budget)."""
        with self._condition:
            return self._capacity()

    def _capacity(self) -> int:
        if self._total <= 0:
            return 0
        return max(min(self._total, 1 << 30), self._total - self._set_aside)

    def set_aside(self, nbytes: int) -> None:
        """Keep ``nbytes`` out of the reservations' reach from now on. Less lets waiting
        requests go at once; more holds new ones back until the reservations already
        granted fit again (nothing granted is taken back)."""
        with self._condition:
            self._set_aside = max(0, int(nbytes))
            self._condition.notify_all()

    @contextlib.contextmanager
    def reserve(self, nbytes: int) -> Iterator[int]:
        """Hold ``nbytes`` (capped at the capacity) while the block runs; gives the bytes held."""
        if self._total <= 0 or nbytes <= 0:
            yield 0
            return
        asked = time.perf_counter()
        with self._condition:
            self._tickets += 1
            entry = [self._tickets, 0]
            self._queue.append(entry)
            # Capped at the capacity when granted: the set-aside may change while it waits.
            while not self._may_go(self._ahead_of(entry), min(int(nbytes), self._capacity())):
                self._condition.wait()
            wanted = min(int(nbytes), self._capacity())
            self._take(self._ahead_of(entry), wanted)
            self._queue.remove(entry)
            self._condition.notify_all()  # the next in line may fit as well
        with self._granted(wanted, time.perf_counter() - asked) as held:
            yield held

    def reserve_now(self, nbytes: int) -> contextlib.AbstractContextManager[int] | None:
        """``nbytes`` (capped at the capacity) held while the block runs, if they can be
        granted at once, as :meth:`reserve` would grant them (they fit, and every request
        waiting may be passed); else None, having waited for nothing. It never waits, so a
        caller may ask while it holds a GPU lock or a worker (where :meth:`reserve`, which
        waits, must not be called: the module's lock order). The bytes count as held from
        the grant: the caller enters what it gets at once, which gives them back at the
        block's end."""
        if self._total <= 0 or nbytes <= 0:
            return contextlib.nullcontext(0)
        with self._condition:
            wanted = min(int(nbytes), self._capacity())
            if not self._may_go(self._queue, wanted):  # behind every request waiting
                return None
            self._take(self._queue, wanted)
        return self._granted(wanted, 0.0)

    @contextlib.contextmanager
    def _granted(self, wanted: int, waited: float) -> Iterator[int]:
        """Hold ``wanted`` bytes, already counted as used, while the block runs."""
        got = time.perf_counter()
        try:
            yield wanted
        finally:
            held = time.perf_counter() - got
            with self._condition:
                self._used -= wanted
                self._byte_seconds += wanted * held
                self._condition.notify_all()
            if self._contention is not None:
                self._contention.record("gpu memory", waited, held)

    def _ahead_of(self, entry: list[int]) -> list[list[int]]:
        """The requests waiting in line before ``entry``."""
        return self._queue[: self._queue.index(entry)]

    def _may_go(self, ahead: list[list[int]], wanted: int) -> bool:
        """Whether a request behind ``ahead`` may take ``wanted`` bytes now: they fit, and
        it is first in line or every request before it may still be passed."""
        return self._used + wanted <= self._capacity() and all(times < self.overtakes for _, times in ahead)

    def _take(self, ahead: list[list[int]], wanted: int) -> None:
        """Count ``wanted`` bytes as used by a request granted before ``ahead``, each of
        which it passed (a pass counts against a request's ``overtakes``)."""
        for earlier in ahead:
            earlier[1] += 1
        self._used += wanted


def budget_bytes(total_bytes: int, processes: int) -> int:
    """What candidates may reserve of a GPU with ``total_bytes`` free for kz (what was free
    when its first worker started): 85 % of it, less a CUDA context (about 0.6 GB) for each
    of the ``processes`` kz keeps on it."""
    return max(1 << 30, int(total_bytes * 0.85) - processes * (640 << 20))
