"""The GPU lock's policy in a model of KernelBench level 1, on any machine (no GPU).

Each candidate is a thread that takes the GPU shared for its reference, its recording and
its trials, works without it to build its kernels, and takes it exclusive to be timed
(stage lengths drawn uniformly around the means measured on the H200, twentieth session:
reference 0.5-3.0 s, recording 1.0-4.5, build 0.5-1.3, trials 1.0-3.5, timing 0.6-2.8).
Sleeps stand for the work, scaled down 50 times. It runs kz's own lock
(``kz_core.evaluate.references.SharedExclusiveLock``: a waiting exclusive holder blocks new
shared ones) against other policies, to see which keeps candidates moving:

- ``kz``: kz's lock, as used by the evaluator;
- ``readers-first``: shared holders never wait for a waiting exclusive one;
- ``phase-fair``: after each exclusive hold, the shared holders waiting then go first;
- ``batched``: waiting exclusive holders block new shared ones only once two wait;
- ``barging``: new shared holders pass a waiting exclusive one while a shared holder has
  held the lock 2 s or more, until the exclusive one has waited 60 s.

``--large F``: a fraction F of the candidates record for 20-45 s (KernelBench's models
with gigabytes of parameters, as a sweep of levels 2 and 3 has them: forty-fifth session).

Usage: python benchmarks/gpu_lock_policies.py [--candidates 100] [--threads 9 13] [--seeds 1 2] [--large 0.08]
It leaves out GPU memory, which the evaluator also waits for (``kz_core.evaluate.memory``):
more threads help here but not on the H200, where more processes leave less memory to share.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.table import Table

from kz_core.evaluate.references import SharedExclusiveLock

SCALE = 0.02  # wall seconds per modelled second
STAGES = {"reference": (0.5, 3.0), "record": (1.0, 4.5), "build": (0.5, 1.3), "trials": (1.0, 3.5), "timing": (0.6, 2.8)}


class ReadersFirst(SharedExclusiveLock):
    def _wait_shared(self) -> None:
        while self._exclusive:
            self._condition.wait()


class PhaseFair(SharedExclusiveLock):
    def __init__(self) -> None:
        super().__init__()
        self._phase = 0  # exclusive holds ended so far
        self._waiting_shared: collections.Counter[int] = collections.Counter()

    def _wait_shared(self) -> None:
        if self._exclusive or self._waiting_exclusive:
            phase = self._phase
            self._waiting_shared[phase] += 1
            while self._exclusive or (self._waiting_exclusive and self._phase == phase):
                self._condition.wait()
            self._waiting_shared[phase] -= 1

    @contextlib.contextmanager
    def _hold_exclusive(self) -> Iterator[None]:
        with self._condition:
            self._waiting_exclusive += 1
            while self._exclusive or self._shared or any(n for p, n in self._waiting_shared.items() if p < self._phase):
                self._condition.wait()
            self._waiting_exclusive -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._condition:
                self._exclusive = False
                self._phase += 1
                self._condition.notify_all()


class Batched(SharedExclusiveLock):
    WAITING = 2

    def _wait_shared(self) -> None:
        while self._exclusive or self._waiting_exclusive >= self.WAITING:
            self._condition.wait()


class Barging(SharedExclusiveLock):
    AFTER = 2.0 * SCALE  # a shared holder held this long is a long one
    CAP = 60.0 * SCALE  # the most an exclusive holder waits with new shared ones passing it

    def __init__(self) -> None:
        super().__init__()
        self._starts: dict[Any, float] = {}
        self._arrivals: list[float] = []

    def _passing(self) -> float:
        """0 when a new shared holder may pass the waiting exclusive ones, else how long
        until that may change."""
        now = time.perf_counter()
        waited = now - min(self._arrivals)
        if waited >= self.CAP:
            return self.CAP
        oldest = now - min(self._starts.values()) if self._starts else 0.0
        if waited >= self.AFTER and oldest >= self.AFTER:
            return 0.0
        return max(1e-4, min(self.CAP - waited, max(self.AFTER - waited, self.AFTER - oldest)))

    def _wait_shared(self) -> None:
        while self._exclusive or self._waiting_exclusive:
            if not self._exclusive and (pause := self._passing()) == 0.0:
                return
            self._condition.wait(timeout=None if self._exclusive else pause)

    @contextlib.contextmanager
    def _hold_shared(self) -> Iterator[None]:
        with super()._hold_shared():
            token = object()
            with self._condition:
                self._starts[token] = time.perf_counter()
            try:
                yield
            finally:
                with self._condition:
                    del self._starts[token]

    @contextlib.contextmanager
    def _hold_exclusive(self) -> Iterator[None]:
        with self._condition:
            arrival = time.perf_counter()
            self._arrivals.append(arrival)
        with super()._hold_exclusive():
            with self._condition:
                self._arrivals.remove(arrival)
            yield


def holder(lock: SharedExclusiveLock, waits: collections.Counter[str]) -> Any:
    """``take(mode, seconds)``: hold ``lock`` (``"shared"`` or ``"exclusive"``) for
    ``seconds`` modelled seconds, adding the modelled wait for it to ``waits[mode]``."""

    def take(mode: str, seconds: float) -> None:
        asked = time.perf_counter()
        with lock.shared() if mode == "shared" else lock.exclusive():
            waits[mode] += (time.perf_counter() - asked) / SCALE
            time.sleep(seconds * SCALE)

    return take


def run_threads(target: Any, threads: int) -> float:
    """Run ``target`` on ``threads`` threads until all return; the modelled seconds it took."""
    started = time.perf_counter()
    pool = [threading.Thread(target=target) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return (time.perf_counter() - started) / SCALE


POLICIES = {"kz": SharedExclusiveLock, "readers-first": ReadersFirst, "phase-fair": PhaseFair, "batched": Batched, "barging": Barging}
LARGE_RECORD = (20.0, 45.0)


def run(lock: SharedExclusiveLock, candidates: int, threads: int, seed: int, large: float = 0.0) -> dict[str, float]:
    """Modelled seconds for ``candidates`` on ``threads``, and the waits for the lock;
    ``large``: the fraction of candidates whose recording takes ``LARGE_RECORD``."""
    rng = random.Random(seed)
    drawn = []
    for _ in range(candidates):
        job = {stage: rng.uniform(*span) for stage, span in STAGES.items()}
        if rng.random() < large:
            job["record"] = rng.uniform(*LARGE_RECORD)
        drawn.append(job)
    jobs = iter(drawn)
    jobs_lock = threading.Lock()
    waits = collections.Counter()

    take = holder(lock, waits)

    def candidate_thread() -> None:
        while True:
            with jobs_lock:
                job = next(jobs, None)
            if job is None:
                return
            take("shared", job["reference"])
            take("shared", job["record"])
            time.sleep(job["build"] * SCALE)
            take("shared", job["trials"])
            take("exclusive", job["timing"])

    seconds = run_threads(candidate_thread, threads)
    return {"seconds": seconds, "per_minute": 60 * candidates / seconds, "shared_wait": waits["shared"], "exclusive_wait": waits["exclusive"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--threads", type=int, nargs="+", default=[9, 13])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--large", type=float, default=0.0, help="fraction of candidates recording for 20-45 s")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    args = parser.parse_args()
    table = Table(title=f"{args.candidates} modelled candidates per run (seconds are modelled seconds)")
    for column in ("policy", "threads", "seed", "seconds", "candidates/min", "shared waits, s", "exclusive waits, s"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name in args.policies:
        for threads in args.threads:
            for seed in args.seeds:
                result = run(POLICIES[name](), args.candidates, threads, seed, args.large)
                table.add_row(name, str(threads), str(seed), f"{result['seconds']:.0f}", f"{result['per_minute']:.1f}", f"{result['shared_wait']:.0f}", f"{result['exclusive_wait']:.0f}")
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
