"""Candidates per minute on KernelBench problems with a fixed candidate set.

Every problem of the chosen level gets the same benchmark-only candidate shape
(``common.wrapping_candidate``: the reference's torch code, its output copied through a
Triton kernel), evaluated with ``eval.guards=warn`` so that all stages run: static checks,
compile, five correctness trials, the size-variation trial, timing and the eager
baseline. The first pass times baselines; the second finds them cached. Usage:

    python benchmarks/eval_throughput.py --problems problems.jsonl --level 1 --device cuda --workers 4
    python benchmarks/eval_throughput.py --problems problems.jsonl --levels 1,2,3 --samples 8 --passes 1   # a sweep
    python benchmarks/eval_throughput.py --problems problems.jsonl --set eval.reservation_overtakes=8   # a setting
    python benchmarks/eval_throughput.py --problems problems.jsonl --limit 40 --inline 9   # with cold load_inline builds among them

``--inline N`` adds N ``cuda_inline`` candidates (KernelBench's ``load_inline`` format) of
the example problems that have one (``examples/candidates/cuda_inline``), each with CUDA
source of its own (a comment), so that each is a cold build by kz's trusted builder, spread
evenly among the others in the order they start: what the other candidates' timings wait
for while those build.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import kernelbench_problems, versions, wrapping_candidate, write_json  # noqa: E402
from floor import floor_table, pass_floor  # noqa: E402

#: Seconds after which a pass in progress is written again, whatever its count of results.
SAVE_EVERY_S = 20.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", required=True)
    parser.add_argument("--level", type=int, default=1, help="0: every problem of --problems (e.g. --problems examples, whose problems have no level)")
    parser.add_argument("--levels", default="", help="several levels, comma-separated (a sweep: --levels 1,2,3 --samples 8)")
    parser.add_argument("--samples", type=int, default=1, help="candidates per problem (each a distinct source: none comes from a cache)")
    parser.add_argument("--limit", type=int, default=0, help="first N problems only")
    parser.add_argument("--ids", default="", help="only these problem ids, numbers and ranges (e.g. 19-32,95)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (repeatable), e.g. eval.reservation_footprints=3")
    parser.add_argument("--inline", type=int, default=0, help="cuda_inline candidates of the example problems, each a cold build, spread among the others")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    from kz_core.config import load_config
    from kz_core.evaluate import Evaluator
    from kz_core.model import Candidate

    levels = [int(level) for level in args.levels.split(",")] if args.levels else [args.level]
    problems = [p for level in levels for p in kernelbench_problems(args.problems, level)]
    seen: set[str] = set()
    for index, problem in enumerate(problems):  # a name two levels share gets its level in front
        if problem.name in seen:
            problems[index] = attrs.evolve(problem, name=f"level{problem.level}_{problem.name}")
        seen.add(problems[index].name)
    if args.ids:
        from kz_core.problems import parse_ids

        wanted = parse_ids(args.ids)
        problems = [p for p in problems if p.problem_id in wanted]
    if args.limit:
        problems = problems[: args.limit]
    candidates = [
        Candidate(p.name, "triton", wrapping_candidate(p.code) + (f"\n# sample {i}\n" if i else ""), f"bench-{i}") for p in problems for i in range(args.samples)
    ]
    inline = _inline_candidates(args.inline, problems) if args.inline else []
    config = load_config(
        None,
        [f"eval.device={args.device}", f"eval.workers={args.workers}", "eval.guards=warn", "eval.baselines=[eager]", "eval.time_budget_ms=300", *args.set],
    ).eval
    passes: list[dict] = []

    def save(current: dict | None = None, quiet: bool = False) -> None:
        """The report so far (a pass in progress included, marked ``cut`` until it ends):
        written after every tenth result too, and after any result that ends
        ``SAVE_EVERY_S`` without one written (large problems take a minute each), so that a
        run cut by a time limit keeps its per-candidate stages and eager times."""
        report = {
            "benchmark": "eval_throughput",
            "levels": levels,
            "samples": args.samples,
            "workers": args.workers,
            "overrides": args.set,
            "versions": versions(),
            "passes": passes + ([current] if current else []),
        }
        write_json(args.out, report, quiet=quiet or current is not None)  # a pass in progress: the log has its lines already

    with Evaluator(problems, config) as evaluator:
        evaluator.warm_up()
        if inline:  # at even intervals of the evaluator's own start order, which they keep
            candidates = _interleave([candidates[i] for i in evaluator.schedule(candidates)], inline)
            evaluator.schedule = lambda batch, together=None: list(range(len(batch)))
        for number in range(args.passes):
            started = time.perf_counter()
            reserved = budget.byte_seconds if (budget := _budget(evaluator)) else 0.0
            done: list = []
            saved = [started]  # when the report was last written

            def report(result, number=number, started=started, done=done, saved=saved):
                done.append(result)
                # Every result with its stage timings, so that a run cut short by a time limit
                # still says where the time went.
                t = result.timings
                stages = " ".join(f"{name} {getattr(t, name + '_s'):.1f}s" for name in ("static", "reference", "waiting", "compile", "correctness", "timing", "baseline", "total") if getattr(t, name + "_s") is not None)
                clock = f" {result.runtime.clock} x{result.runtime.calls_per_trial}" if result.runtime else ""
                if result.runtime and result.runtime.unseen_ms is not None and result.runtime.median_ms > 0:
                    clock += f" unseen {result.runtime.unseen_ms / result.runtime.median_ms:.2f}x"  # on inputs never seen, against the median
                warned = sorted({f.check for f in result.findings if f.severity.value == "warning"} - {"torch_compute_in_forward"})
                clock += f" warnings {','.join(warned)}" if warned else ""
                speedup = f" eager {result.speedups['eager']:.2f}x" if "eager" in result.speedups else ""
                eager = f" ({result.baselines['eager'].median_ms:.3f} ms)" if "eager" in result.baselines else ""
                print(f"pass {number + 1}: {len(done)} done after {time.perf_counter() - started:.0f} s: {result.problem} {result.verdict.value}{clock}{speedup}{eager} ({stages})", flush=True)
                if result.runtime and result.runtime.note:
                    print(f"    {result.runtime.note[:300]}", flush=True)
                if result.verdict.value != "correct":
                    print(f"    {result.message[:600]}", flush=True)
                if len(done) % 10 == 0:  # where candidates queue, in case a time limit cuts the run
                    print(f"    locks: {_locks(evaluator.contention.snapshot())}", flush=True)
                    print(f"    peak GPU memory per request, GiB: {evaluator.contention.peaks()}", flush=True)
                    print(f"    largest peak per request in footprints of its problem (1 GiB a call or more): {evaluator.contention.footprint_ratios()}", flush=True)
                    print(f"    worker requests: {_requests(evaluator.contention.requests())}", flush=True)
                if len(done) % 10 == 0 or time.perf_counter() - saved[0] > SAVE_EVERY_S:
                    save({**_summary(number, list(done), time.perf_counter() - started, evaluator, config), "memory": _memory(evaluator, reserved), "cut": True})
                    saved[0] = time.perf_counter()

            results = evaluator.evaluate(candidates, progress=report)
            passes.append({**_summary(number, results, time.perf_counter() - started, evaluator, config), "memory": _memory(evaluator, reserved)})
            evaluator.contention.reset()
            print(passes[-1], flush=True)
            print(floor_table(passes[-1]["floor"], passes[-1]["seconds"]), flush=True)
            if passes[-1]["memory"]:
                memory = passes[-1]["memory"]
                print(
                    f"GPU memory reservations: {memory['reserved_gb_s']} GB*s of a {memory['capacity_gb']} GB budget: "
                    f"at least {memory['floor_s']} s of the pass's {passes[-1]['seconds']} s, packed perfectly",
                    flush=True,
                )
            save(quiet=True)  # each finished pass at once: closing the evaluator takes a while on a GPU
    save()


def _inline_candidates(count: int, problems: list) -> list:
    """``count`` cuda_inline candidates of the example problems, each CUDA source made
    distinct by a comment (a cold build each); their problems are added to ``problems``."""
    from kz_core.model import Candidate
    from kz_core.problems import load_problems

    repo = Path(__file__).resolve().parent.parent
    sources = sorted((repo / "examples" / "candidates" / "cuda_inline").glob("*.py"))
    examples = {p.name: p for p in load_problems(str(repo / "examples" / "problems")).problems}
    usable = [(examples[path.stem], path.read_text()) for path in sources if path.stem in examples]
    inline = []
    for i in range(count):
        problem, code = usable[i % len(usable)]
        marked = code.replace('cuda_source = r"""', f'cuda_source = r"""// benchmark sample {i}', 1)
        if marked == code:
            raise SystemExit(f"examples/candidates/cuda_inline/{problem.name}.py has no cuda_source = r\"\"\" to mark")
        inline.append(Candidate(problem.name, "cuda_inline", marked, f"inline-{i}"))
    names = {p.name for p in problems}
    problems += [p for p in examples.values() if p.name not in names and any(c.problem == p.name for c in inline)]
    return inline


def _interleave(ordered: list, inline: list) -> list:
    """``inline`` put among ``ordered`` at even intervals (what is left over, at the end)."""
    step = max(1, len(ordered) // (len(inline) + 1))
    left, mixed = list(inline), []
    for index, candidate in enumerate(ordered):
        if index and index % step == 0 and left:
            mixed.append(left.pop(0))
        mixed.append(candidate)
    return mixed + left


def _summary(number: int, results: list, elapsed: float, evaluator, config) -> dict:
    """One pass: its rate, verdicts, locks, worker requests, per candidate its stages, its
    reference's eager time and its timed calls, and the pass's floor (benchmarks/floor.py)."""
    summary = {
        "pass": number + 1,
        "candidates": len(results),
        "seconds": round(elapsed, 1),
        "candidates_per_minute": round(60 * len(results) / elapsed, 1) if elapsed > 0 else None,
        "verdicts": dict(collections.Counter(r.verdict.value for r in results)),
        "clocks": dict(collections.Counter(r.runtime.clock for r in results if r.runtime)),
        # Candidates evaluated again after the GPU ran out of memory (the finding says how).
        "again_alone": sum(any(f.check == "gpu_memory" for f in r.findings) for r in results),
        "locks": evaluator.contention.snapshot(),
        "peak_gib": evaluator.contention.peaks(),
        "peak_footprints": evaluator.contention.footprint_ratios(),
        "requests": evaluator.contention.requests(),
        "results": [
            {
                "problem": r.problem,
                "verdict": r.verdict.value,
                "eager_ms": r.baselines["eager"].median_ms if "eager" in r.baselines else None,
                # The candidate's time on the repeated timing inputs and on unseen inputs.
                "median_ms": r.runtime.median_ms if r.runtime else None,
                "unseen_ms": r.runtime.unseen_ms if r.runtime else None,
                # Forward calls timed: the candidate's, on unseen inputs, the eager baseline's
                # (benchmarks/floor.py turns them into the stages' floors).
                "timed_calls": r.runtime.trials * r.runtime.calls_per_trial if r.runtime else None,
                "unseen_calls": _unseen_calls(r.runtime),
                "eager_calls": r.baselines["eager"].trials * r.baselines["eager"].calls_per_trial if "eager" in r.baselines else None,
                "warnings": sorted({f.check for f in r.findings if f.severity.value == "warning"}),
                "message": r.message if r.verdict.value != "correct" else "",
                "stages_s": {k: round(v, 3) for k, v in attrs.asdict(r.timings).items() if v is not None},
            }
            for r in results
        ],
    }
    summary["floor"] = pass_floor(summary["results"], config.trials, config.size_variation)
    return summary


def _unseen_calls(runtime) -> int | None:
    """Forward calls a timing made on unseen inputs: every call of ``UNSEEN_REPLAYS``
    replays of a graph, one call per unseen seed with events; None without that time."""
    from kz_core.evaluate.timing import GRAPH_CLOCK, UNSEEN_REPLAYS

    if runtime is None or runtime.unseen_ms is None:
        return None
    return UNSEEN_REPLAYS * runtime.calls_per_trial if runtime.clock == GRAPH_CLOCK else UNSEEN_REPLAYS


def _budget(evaluator):
    """The GPU memory budget (the first device's), or None where the evaluator's lanes are
    Ray actors (each keeps its own, out of reach)."""
    lanes = getattr(evaluator, "lanes", None)
    if lanes and not hasattr(lanes[0], "memory_budget"):
        return None
    return evaluator.memory_budget()


def _memory(evaluator, before: float) -> dict | None:
    """The pass's GPU memory reservations against the budget: their bytes times seconds,
    and that divided by the budget (``floor_s``: the pass could not have been shorter with
    its reservations held as long and packed perfectly). None without a budget (a CPU)."""
    budget = _budget(evaluator)
    if budget is None or budget.capacity <= 0:
        return None
    held = budget.byte_seconds - before
    return {"capacity_gb": round(budget.capacity / 1e9, 1), "reserved_gb_s": round(held / 1e9, 1), "floor_s": round(held / budget.capacity, 1)}


def _locks(snapshot: dict[str, dict[str, float]]) -> str:
    """Each lock's count, total wait and total hold, in one line."""
    return "; ".join(f"{name}: {s['taken']}x wait {s['waited_s']:.0f}s (max {s['max_wait_s']:.0f}) hold {s['held_s']:.0f}s" for name, s in snapshot.items())


def _requests(requests: dict[str, dict[str, float]]) -> str:
    """Each kind of worker request's count, total and longest seconds, in one line: where
    the workers' time goes (a candidate's stages are made of these)."""
    return "; ".join(f"{name}: {r['count']}x {r['total_s']:.1f}s (max {r['max_s']:.1f})" for name, r in requests.items())


if __name__ == "__main__":
    main()
