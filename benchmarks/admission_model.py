"""Which candidate a free slot starts, in a model of a sweep, on any machine (no GPU).

The batch's fixed order (``Evaluator.schedule``: problems two at a time, their candidates
alternating) against a policy that passes over a problem while one of its candidates
waits for a GPU memory reservation: the slot goes to the first of the next
``PROBLEMS_AHEAD`` problems with none waiting (the order's first when all wait). In the
forty-seventh session's H100 sweep, candidates waited 1,067 s for memory and 434 s for a
slot in 440 s: a large problem's candidates each took a slot to wait in. Written into the
evaluator in the forty-eighth session and taken out again: this model gave it 0-3 %.

A sweep's problems each have ``--samples`` candidates; a fraction ``--large`` of the
problems are large, and their candidates reserve a share of the GPU's memory budget (drawn
from 10 % to 45 %, as KernelBench's 2-19 GB reservations of an H100's budget) for their
recording and again for their trials. Each candidate is a thread of a pool of
``--threads`` slots that takes the GPU shared for its reference, its recording and its
trials, works without it to build its kernels, and takes it exclusive to be timed (the
stage lengths of ``benchmarks/gpu_lock_policies.py``, measured on the H200). Sleeps stand
for the work, scaled down 50 times. The real classes run: kz's lock
(``SharedExclusiveLock``) and its memory budget (``MemoryBudget``).

Usage: python benchmarks/admission_model.py [--problems 30] [--samples 8] [--threads 9] [--large 0.3 0.5] [--seeds 1 2] [--share 100 450]
It leaves out the GPU's own capacity (work beside work costs nothing here), the reference
workers a problem started pins, and what a candidate waiting for memory holds besides its
slot.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kz_core.evaluate.evaluator import PROBLEMS_TOGETHER
from kz_core.evaluate.memory import MemoryBudget
from kz_core.evaluate.references import SharedExclusiveLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_lock_policies import SCALE, STAGES, holder, run_threads  # noqa: E402

CAPACITY = 1000  # the budget, in thousandths
SHARE = (100, 450)  # a large problem's reservation, in thousandths of the budget
PROBLEMS_AHEAD = 4


class Admission:
    """The next candidate to start, as each slot frees: the order's first, but a problem
    with a candidate waiting for memory (``waiting``) is passed over for the first of the
    next ``PROBLEMS_AHEAD`` problems with none waiting."""

    def __init__(self, order: list[tuple[int, str]], waiting: Any):
        self._pending = list(order)
        self._waiting = waiting
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            problems: list[str] = []
            for position, (_, problem) in enumerate(self._pending):
                if problem not in problems:
                    if len(problems) == PROBLEMS_AHEAD:
                        break
                    problems.append(problem)
                if not self._waiting(problem):
                    return self._pending.pop(position)[0]
            return self._pending.pop(0)[0]


def schedule(problems: list[str], samples: int) -> list[tuple[int, str]]:
    """The batch's order on a GPU: problems ``PROBLEMS_TOGETHER`` at a time, alternating."""
    names: list[str] = []
    for start in range(0, len(problems), PROBLEMS_TOGETHER):
        names += problems[start : start + PROBLEMS_TOGETHER] * samples
    return list(enumerate(names))


def run(policy: str, problems: int, samples: int, threads: int, large: float, seed: int, shares: tuple[int, int] = SHARE) -> dict[str, float]:
    rng = random.Random(seed)
    names = [f"p{i}" for i in range(problems)]
    share = {name: rng.randint(*shares) if rng.random() < large else 0 for name in names}
    order = schedule(names, samples)
    jobs = {index: {stage: rng.uniform(*span) for stage, span in STAGES.items()} for index, _ in order}
    problem_of = dict(order)
    lock, budget = SharedExclusiveLock(), MemoryBudget(CAPACITY)
    waiting: collections.Counter[str] = collections.Counter()
    counts_lock = threading.Lock()
    waits: collections.Counter[str] = collections.Counter()

    def waits_for_memory(name: str) -> bool:
        with counts_lock:
            return waiting[name] > 0

    def reserve(name: str) -> Any:
        with counts_lock:
            waiting[name] += 1
        asked = time.perf_counter()
        reservation = budget.reserve(share[name])
        reservation.__enter__()
        with counts_lock:
            waiting[name] -= 1
            waits["memory"] += (time.perf_counter() - asked) / SCALE
        return reservation

    take = holder(lock, waits)

    def evaluate(index: int) -> None:
        job, name = jobs[index], problem_of[index]
        take("shared", job["reference"])
        held = reserve(name)
        take("shared", job["record"])
        held.__exit__(None, None, None)
        time.sleep(job["build"] * SCALE)
        held = reserve(name)
        take("shared", job["trials"])
        held.__exit__(None, None, None)
        take("exclusive", job["timing"])

    admission = Admission(order, waits_for_memory if policy == "pass-over" else lambda name: False)
    left = iter(range(len(order)))
    left_lock = threading.Lock()

    def slot() -> None:
        while True:
            with left_lock:
                if next(left, None) is None:
                    return
            evaluate(admission.take())

    seconds = run_threads(slot, threads)
    return {"seconds": seconds, "per_minute": 60 * len(order) / seconds, **{f"{k}_wait": v for k, v in waits.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--threads", type=int, default=9)
    parser.add_argument("--large", type=float, nargs="+", default=[0.3, 0.5], help="fractions of the problems that are large")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--share", type=int, nargs=2, default=list(SHARE), help="a large problem's reservation, thousandths of the budget (from, to)")
    args = parser.parse_args()
    table = Table(title=f"{args.problems} modelled problems of {args.samples} candidates on {args.threads} slots (modelled seconds)")
    for column in ("large problems", "seed", "order", "seconds", "candidates/min", "memory waits, s", "shared waits, s", "exclusive waits, s"):
        table.add_column(column, justify="right")
    for large in args.large:
        for seed in args.seeds:
            for policy in ("fixed", "pass-over"):
                r = run(policy, args.problems, args.samples, args.threads, large, seed, tuple(args.share))
                table.add_row(f"{large:.0%}", str(seed), policy, f"{r['seconds']:.0f}", f"{r['per_minute']:.1f}", f"{r.get('memory_wait', 0):.0f}", f"{r.get('shared_wait', 0):.0f}", f"{r.get('exclusive_wait', 0):.0f}")
    Console().print(table)


if __name__ == "__main__":
    main()
