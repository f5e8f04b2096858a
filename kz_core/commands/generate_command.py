"""``kz generate``: sample kernels from a model for problems; with ``--eval``, evaluate
them and report pass@1, pass@k and fast_1 per problem and overall."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import click
from rich.table import Table

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def report_table(summary, results, n: int) -> Table:
    """Per problem and overall: samples, correct, pass@1, pass@n, fast_1 against eager and
    the best speedup (``-``: not measured, as on a CPU)."""
    from kz_core.metrics import summarize

    table = Table(title=f"kz generate: {n} samples per problem")
    for column in ("problem", "samples", "correct", "pass@1", f"pass@{n}", "fast_1", "best speedup vs eager"):
        table.add_column(column, justify="left" if column == "problem" else "right")
    for row in summary.per_problem:
        values = {entry.k: entry.value for entry in row.pass_at_k}
        fast_1 = summarize([r for r in results if r.problem == row.problem], ks=(1,)).fast_1_eager
        best = "-" if row.best_speedup_eager is None else f"{row.best_speedup_eager:.2f}x"
        table.add_row(row.problem, str(row.samples), str(row.correct), _percent(values.get(1)), _percent(values.get(n)), _percent(fast_1), best)
    overall = {entry.k: entry.value for entry in summary.pass_at_k}
    best = "-" if summary.speedup_eager is None else f"geomean {summary.speedup_eager:.2f}x"
    table.add_row(
        "[bold]overall[/bold]", str(summary.total), str(summary.correct), _percent(overall.get(1)), _percent(overall.get(n)),
        _percent(summary.fast_1_eager), best,
    )
    return table


@click.command(name="generate")
@click.option("--problems", "-p", "problems_source", default=None, help="Problem source (problems.source).")
@click.option("--n", "-n", "n", type=int, default=8, show_default=True, help="Samples per problem.")
@click.option("--backend", "-b", default=None, help="Backend the prompts ask for (eval.backend).")
@click.option("--out", "-o", "out_path", default=None, type=click.Path(), help="Completions JSONL (default: completions.jsonl in the run directory).")
@click.option("--eval", "evaluate", is_flag=True, help="Evaluate the samples and report pass@k and fast_1.")
@click.option("--device", "-d", default=None, help="Where to evaluate: cpu, cuda or cuda:N (eval.device).")
@click.option("--json", "as_json", is_flag=True, help="Print the evaluation summary as JSON.")
@config_options
def generate_command(config, problems_source, n, backend, out_path, evaluate, device, as_json) -> None:
    """Sample kernels from the policy model (policy.model; default: the embedded SmolLM2)."""
    from kz_core.cli import KzUsageError, apply_options, stderr, stdout
    from kz_core.commands.eval_command import verdict_progress
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.journal import Journal
    from kz_core.generate import evaluate_samples, sample_candidates
    from kz_core.metrics import summarize
    from kz_core.plugins import get_plugin_manager
    from kz_core.problems import load_problems_from_config
    from kz_core.rundir import open_run_dir
    from kz_core.serialization import dumps, to_json_dict

    if n < 1:
        raise KzUsageError("--n must be at least 1")
    overrides = {"eval.backend": backend, "eval.device": device, "problems.source": problems_source}
    config = apply_options(config, overrides)
    problem_set = load_problems_from_config(config.problems)
    if not problem_set.problems:
        raise KzUsageError(f"no problems selected from {problem_set.source}")
    run_dir = open_run_dir(config, command="kz generate")
    samples = sample_candidates(problem_set.problems, n, config.eval.backend, config.policy, get_plugin_manager())
    out = Path(out_path) if out_path else run_dir / "completions.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps({**to_json_dict(s), "candidate": s.code is not None}) + "\n" for s in samples), encoding="utf-8")
    parsed = sum(1 for s in samples if s.code is not None)
    stderr.print(f"{len(samples)} completions ({parsed} with a candidate) written to {out}", highlight=False)
    if not evaluate:
        return
    verdicts: Counter[str] = Counter()
    with Journal(run_dir / "journal.sqlite") as journal:
        with Evaluator(problem_set.problems, config.eval, journal=journal) as evaluator, verdict_progress("eval", len(samples), verdicts) as advance:
            results = evaluate_samples(samples, evaluator, progress=advance)
    (run_dir / "results.jsonl").write_text("".join(dumps(r) + "\n" for r in results), encoding="utf-8")
    summary = summarize(results, ks=sorted({1, n}))
    if as_json:
        click.echo(json.dumps(to_json_dict(summary), indent=2))
    else:
        stdout.print(report_table(summary, results, n))
    stderr.print("verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())) + f"; run directory: {run_dir}", highlight=False)


@hookimpl
def register_commands(cli):
    cli.add_command(generate_command)
