"""Issue 16's learning curve: what a model writes at each training point, judged the same way.

A point is a model (the base model, after SFT, after CA-GRPO, after a co-evolution round).
``sample`` draws, from that model, ``--n`` Coder samples per problem of two sets and one
Proposer module per API set, and writes them under ``OUT/points/<label>/``; it needs the
model, so it runs where the GPU is. ``judge`` evaluates what was sampled, point by point,
with the sandboxed evaluator (``heldout``: the synthetic held-out split, op families never
trained on; ``indist``: new draws of the trained families; both small enough for Triton's
interpreter on a CPU; ``kb``: KernelBench level-1 problems at their published sizes, for a
GPU) and module validation (``proposer``), and writes one line per point and
set to ``OUT/curve.jsonl``: samples, format-error rate, pass@1, pass@n, verdicts; for the
Proposer, the share of valid modules. ``kz report OUT`` plots it. Usage:

    python benchmarks/learning_curve.py sample --label base --out runs/curve \\
        --heldout runs/curve-synth/synth.heldout-problems.jsonl --synth runs/curve-synth/synth.jsonl \\
        --kb .kb/problems.jsonl policy.model=... policy.one_shot=false
    python benchmarks/learning_curve.py judge --out runs/curve --sets heldout,indist,proposer -d cpu
    python benchmarks/learning_curve.py judge --out runs/curve --sets kb -d cuda
    python benchmarks/learning_curve.py judge --out runs/curve --sets kb --max-size 256 -d cpu   # smaller sizes, on a CPU

Points sampled on another machine carry that machine's problem paths; ``--source
kb=.kb/problems.jsonl`` (per set) gives this machine's.

``select`` samples and judges training problems and keeps those the model solves sometimes
but not always, where GRPO has a signal (``--out ids.json``; ``problems.ids`` takes them).

The easy KernelBench list is level 1, problems 19-32 (``--kb-ids``): ReLU, LeakyReLU,
Sigmoid, Tanh, Softmax, LogSoftmax, Swish, GELU, SELU, HardSigmoid, Softplus, Softsign,
ELU, HardTanh. Pass@k needs correctness only, so ``judge`` turns timing off.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

SETS = ("heldout", "indist", "kb", "proposer")


def _config(overrides: list[str]) -> Any:
    from kz_core.config import load_config

    return load_config(None, overrides)


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sample(args: argparse.Namespace) -> None:
    from kz_core.generate import sample_candidates
    from kz_core.plugins import get_plugin_manager
    from kz_core.problems import load_problems
    from kz_core.proposer.propose import sample_modules
    from kz_core.serialization import to_json_dict

    config = _config(args.overrides)
    pm = get_plugin_manager()
    folder = Path(args.out) / "points" / args.label
    meta = {"label": args.label, "model": config.policy.model or "embedded:smollm2", "n": args.n, "seconds": {}}
    first = f"1-{args.limit}" if args.limit else ""
    sets = [("heldout", args.heldout, None, first), ("indist", args.indist, None, first), ("kb", args.kb, 1, args.kb_ids)]
    for name, source, level, ids in sets:
        if not source:
            continue
        started = time.perf_counter()
        problems = load_problems(source, level=level, ids=ids).problems
        samples = sample_candidates(problems, args.n, config.eval.backend, config.policy, pm)
        _write_jsonl(folder / f"{name}.jsonl", [to_json_dict(s) for s in samples])
        meta["seconds"][name] = round(time.perf_counter() - started, 1)
        meta[f"{name}_source"] = source
        print(f"{args.label} {name}: {len(samples)} samples, {sum(s.code is not None for s in samples)} with code, {meta['seconds'][name]} s", flush=True)
    if args.synth and args.modules > 0:
        started = time.perf_counter()
        rows = [r for r in _read_jsonl(Path(args.synth)) if r["role"] == "proposer" and r["split"] == "heldout"]
        api_sets = [r["apis"] for r in rows[: args.modules]]
        replies = sample_modules(api_sets, config.policy, pm)
        _write_jsonl(folder / "proposer.jsonl", [{"apis": apis, "code": r.code, "reason": r.reason} for apis, r in zip(api_sets, replies)])
        meta["seconds"]["proposer"] = round(time.perf_counter() - started, 1)
        print(f"{args.label} proposer: {len(replies)} modules, {sum(r.code is not None for r in replies)} with code, {meta['seconds']['proposer']} s", flush=True)
    (folder / "point.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def shrink_sizes(code: str, max_size: int) -> str:
    """The problem with every module-level size constant above ``max_size`` set to it
    (``batch_size = 4096`` -> ``batch_size = 256``): KernelBench's published sizes, tens
    of gigabytes for an activation, for Triton's interpreter on a CPU. The same code for the
    reference and the candidate, so correctness is judged alike, at other sizes."""
    import ast

    from kz_core.evaluate.variants import size_constants

    constants = {name: value for name, value in size_constants(code).items() if value > max_size}
    lines = code.splitlines(keepends=True)
    for node in reversed(ast.parse(code).body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id in constants:
            if node.value.lineno != node.value.end_lineno:
                continue
            line = lines[node.value.lineno - 1]
            lines[node.value.lineno - 1] = line[: node.value.col_offset] + str(max_size) + line[node.value.end_col_offset :]
    return "".join(lines)


def _judge_coder(folder: Path, name: str, config: Any, journal: Any, max_size: int = 0, sources: dict[str, str] | None = None) -> dict[str, Any] | None:
    from kz_core.evaluate import Evaluator
    from kz_core.generate import Sample, evaluate_samples

    sources = sources or {}
    from kz_core.metrics import summarize
    from kz_core.problems import load_problems

    path = folder / f"{name}.jsonl"
    if not path.is_file():
        return None
    meta = json.loads((folder / "point.json").read_text())
    samples = [Sample(**row) for row in _read_jsonl(path)]
    # The path the sampling machine used, unless --source gives this machine's.
    source = sources.get(name) or meta[f"{name}_source"]
    wanted = {s.problem for s in samples}
    problems = [p for p in load_problems(source).problems if p.name in wanted]
    if max_size:
        import attrs

        problems = [attrs.evolve(p, code=shrink_sizes(p.code, max_size)) for p in problems]
    with Evaluator(problems, config.eval, journal=journal) as evaluator:
        results = evaluate_samples(samples, evaluator)
    n = meta["n"]
    summary = summarize(results, ks=sorted({1, n}))
    at = {entry.k: entry.value for entry in summary.pass_at_k}
    return {
        "samples": summary.total,
        "problems": summary.problems,
        "format_error_rate": summary.verdicts.get("format_error", 0) / max(summary.total, 1),
        "correct": summary.correct,
        "pass@1": at.get(1),
        "pass@n": at.get(n),
        "n": n,
        "verdicts": {k: v for k, v in summary.verdicts.items() if v},
    }


def _judge_proposer(folder: Path, config: Any) -> dict[str, Any] | None:
    from kz_core.parsing import ParsedReply
    from kz_core.proposer.validate import validate_modules

    path = folder / "proposer.jsonl"
    if not path.is_file():
        return None
    rows = _read_jsonl(path)
    modules = [(f"curve_module_{i}", ParsedReply(r["code"], r["reason"]), r["apis"]) for i, r in enumerate(rows)]
    validations = validate_modules(modules, config, batch_duplicates=False)
    reasons: dict[str, int] = {}
    for v in validations:
        if not v.valid:
            key = v.findings[0].check if v.findings else "invalid"
            reasons[key] = reasons.get(key, 0) + 1
    formats = sum(1 for r in rows if r["code"] is None)
    return {
        "samples": len(rows),
        "format_error_rate": formats / max(len(rows), 1),
        "valid": sum(v.valid for v in validations),
        "valid_rate": sum(v.valid for v in validations) / max(len(rows), 1),
        "invalid_reasons": reasons,
    }


def judge(args: argparse.Namespace) -> None:
    from kz_core.evaluate.journal import Journal

    out = Path(args.out)
    overrides = [f"eval.device={args.device}", "eval.timing=false", *args.overrides]
    config = _config(overrides)
    sets = [s for s in args.sets.split(",") if s]
    sources = dict(item.split("=", 1) for item in args.source)
    unknown = set(sets) - set(SETS)
    if unknown:
        raise SystemExit(f"unknown set(s) {', '.join(sorted(unknown))}: use {', '.join(SETS)}")
    curve_path = out / "curve.jsonl"
    rows = _read_jsonl(curve_path) if curve_path.is_file() else []
    labels = args.points.split(",") if args.points else [p.name for p in sorted((out / "points").iterdir(), key=lambda p: p.stat().st_mtime)]
    with Journal(out / "journal.sqlite") as journal:
        for order, label in enumerate(labels):
            folder = out / "points" / label
            for name in sets:
                started = time.perf_counter()
                shrunk = args.max_size if name == "kb" else 0
                measured = _judge_proposer(folder, config) if name == "proposer" else _judge_coder(folder, name, config, journal, shrunk, sources)
                if measured is None:
                    continue
                row = {"point": label, "order": order, "set": name, "device": config.eval.device, **measured, "seconds": round(time.perf_counter() - started, 1)}
                if shrunk:
                    row["max_size"] = shrunk
                rows = [r for r in rows if (r["point"], r["set"]) != (label, name)] + [row]
                _write_jsonl(curve_path, sorted(rows, key=lambda r: (r["order"], r["set"])))
                print(json.dumps(row), flush=True)


def select(args: argparse.Namespace) -> None:
    """Sample the model ``--n`` times on training problems, judge them (correctness only),
    and write the ids of the problems it solves sometimes but not always: where GRPO's
    group advantages are not zero. A group that is all correct (or all wrong) with equal
    rewards teaches nothing, and after SFT most training problems are all correct."""
    from kz_core.evaluate import Evaluator
    from kz_core.generate import evaluate_samples, sample_candidates
    from kz_core.plugins import get_plugin_manager
    from kz_core.problems import load_problems

    config = _config([f"eval.device={args.device}", "eval.timing=false", *args.overrides])
    problems = load_problems(args.problems, ids=args.ids).problems
    started = time.perf_counter()
    samples = sample_candidates(problems, args.n, config.eval.backend, config.policy, get_plugin_manager())
    sampled = time.perf_counter() - started
    with Evaluator(problems, config.eval) as evaluator:
        results = evaluate_samples(samples, evaluator)
    correct: dict[str, list[bool]] = {p.name: [] for p in problems}
    verdicts: dict[str, dict[str, int]] = {}
    for result in results:
        correct[result.problem].append(result.correct)
        verdicts[result.verdict.value] = verdicts.get(result.verdict.value, 0) + 1
    rates = {name: sum(flags) / max(len(flags), 1) for name, flags in correct.items()}
    chosen = [p.problem_id for p in problems if args.low <= rates[p.name] <= args.high and p.problem_id is not None]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"ids": chosen, "rates": rates, "verdicts": verdicts, "n": args.n, "sample_s": round(sampled, 1), "total_s": round(time.perf_counter() - started, 1)}, indent=2) + "\n", encoding="utf-8")
    print(f"{len(chosen)} of {len(problems)} problems solved in {args.low:.0%}..{args.high:.0%} of {args.n} samples: {','.join(map(str, chosen))} (verdicts: {verdicts})", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample", help="sample one point's Coder and Proposer outputs (needs the model)")
    s.add_argument("--label", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--heldout", default="", help="problems JSONL of the held-out split (kz data synth)")
    s.add_argument("--indist", default="", help="problems JSONL of new draws of the trained families (kz data synth --seed S --heldout '')")
    s.add_argument("--limit", type=int, default=0, help="only the first LIMIT problems of --heldout and --indist (0: all)")
    s.add_argument("--kb", default="", help="KernelBench problems.jsonl")
    s.add_argument("--kb-ids", default="19-32", help="level-1 problem ids of the easy list")
    s.add_argument("--synth", default="", help="kz data synth JSONL: the held-out Proposer rows give the API sets")
    s.add_argument("--modules", type=int, default=32, help="Proposer modules to sample")
    s.add_argument("--n", type=int, default=8, help="Coder samples per problem")
    s.add_argument("overrides", nargs="*", help="KEY=VALUE config overrides")
    j = sub.add_parser("judge", help="evaluate the sampled points into OUT/curve.jsonl")
    j.add_argument("--out", required=True)
    j.add_argument("--sets", default="heldout,indist,proposer")
    j.add_argument("--points", default="", help="labels in order, comma-separated (default: as sampled)")
    j.add_argument("--device", "-d", default="cpu")
    j.add_argument("--source", action="append", default=[], metavar="SET=PATH", help="the problems of SET here, when the points were sampled on another machine (e.g. kb=.kb/problems.jsonl)")
    j.add_argument("--max-size", type=int, default=0, help="judge the kb set with its size constants capped at this (e.g. 256, for a CPU); 0: published sizes")
    j.add_argument("overrides", nargs="*", help="KEY=VALUE config overrides")
    c = sub.add_parser("select", help="training problems the model solves sometimes (GRPO's signal); writes their ids")
    c.add_argument("--problems", required=True, help="training problems JSONL (kz data synth's train-problems)")
    c.add_argument("--ids", default="", help="only these problem ids (e.g. 1-128)")
    c.add_argument("--n", type=int, default=8, help="samples per problem")
    c.add_argument("--low", type=float, default=0.125, help="lowest pass rate kept")
    c.add_argument("--high", type=float, default=0.875, help="highest pass rate kept")
    c.add_argument("--out", required=True, help="JSON with the chosen ids and every problem's pass rate")
    c.add_argument("--device", "-d", default="cpu", help="where the samples are judged")
    c.add_argument("overrides", nargs="*", help="KEY=VALUE config overrides")
    args = parser.parse_args(argv)
    {"sample": sample, "judge": judge, "select": select}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
