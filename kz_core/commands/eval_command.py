"""``kz eval``: evaluate candidates against their problems, write results, print a summary.

Results go to ``--out`` (JSON lines, one per candidate, in input order) and to the run's
journal (``<run dir>/journal.sqlite``), which a re-run of the same command reads back
instead of evaluating again (``--no-cache`` evaluates everything anew). The run directory
defaults to ``runs/eval-<candidates file name>`` so that re-running resumes.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl


def _percent(value: float | None) -> str:
    return "not measured" if value is None else f"{100 * value:.1f}%"


def _ratio(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.3f}x"


def summary_table(summary, title: str) -> Table:
    """The summary people compare: verdict counts, pass rate, pass@k, fast_1, speedups."""
    table = Table(title=title, show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for verdict, count in summary.verdicts.items():
        if count:
            table.add_row(f"verdict {verdict}", str(count))
    table.add_row("candidates", str(summary.total))
    table.add_row("problems", str(summary.problems))
    table.add_row("pass rate", _percent(summary.pass_rate))
    for entry in summary.pass_at_k:
        if entry.value is not None:  # None: some problem has fewer than k samples
            table.add_row(f"pass@{entry.k}", _percent(entry.value))
    table.add_row("fast_1 vs eager", _percent(summary.fast_1_eager))
    table.add_row("fast_1 vs torch.compile", _percent(summary.fast_1_compile))
    table.add_row("geomean speedup vs eager", _ratio(summary.speedup_eager))
    table.add_row("geomean speedup vs torch.compile", _ratio(summary.speedup_compile))
    if summary.cpu_timed:
        table.add_row("timed on the CPU (no speedups)", str(summary.cpu_timed))
    return table


#: At most this many candidates that are not correct are listed one by one on the console.
SHOWN_FAILURES = 40


@contextlib.contextmanager
def verdict_progress(label: str, total: int, verdicts: Counter[str]) -> Iterator[Callable[[Any], None]]:
    """A progress bar of results with the verdicts so far, and each result's verdict as
    one line above it (``-q`` hides both); gives the callback each result goes to."""
    from kz_core.cli import quiet_level, stderr

    with Progress(
        TextColumn(f"[bold]{label}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=stderr,
        transient=False,
        disable=quiet_level() > 0,
    ) as progress:
        task = progress.add_task(label, total=total, counts="")
        verbose = not quiet_level()

        def advance(result: Any) -> None:
            verdicts[result.verdict.value] += 1
            counts = " ".join(f"{k}={v}" for k, v in sorted(verdicts.items()))
            progress.update(task, advance=1, counts=counts)
            if verbose:  # each candidate's verdict as it comes, above the bar
                colour = "green" if result.verdict.value == "correct" else "red"
                line = f"[{colour}]{result.verdict.value}[/{colour}] {escape(result.problem)}/{escape(result.sample_id)}: {escape(result.message)}"
                progress.console.print(line[:400], highlight=False, markup=True)

        yield advance


def failures_table(results) -> Table | None:
    """The candidates that are not correct, each with its verdict's reason (first line)."""
    failed = [r for r in results if r.verdict.value != "correct"]
    if not failed:
        return None
    table = Table(title=f"not correct: {len(failed)} of {len(results)}" + (f" (first {SHOWN_FAILURES}; all in results.jsonl)" if len(failed) > SHOWN_FAILURES else ""))
    for column in ("problem", "sample", "verdict", "why"):
        table.add_column(column, overflow="fold")
    for result in failed[:SHOWN_FAILURES]:
        why = result.message.split(": ", 1)[1] if ": " in result.message else result.message
        table.add_row(result.problem, result.sample_id, result.verdict.value, why[:300])
    return table


@click.command(name="eval")
@click.option("--problems", "-p", "problems_source", default=None, help="Problem source (problems.source): folder, .jsonl, hf:ID or examples.")
@click.option("--candidates", "-c", "candidates_path", required=True, type=click.Path(), help="Candidates: a .jsonl file or a folder of <problem>.py files.")
@click.option("--out", "-o", "out_path", default=None, type=click.Path(), help="Results JSONL (default: results.jsonl in the run directory).")
@click.option("--backend", "-b", default=None, help="Backend for candidates that name none (eval.backend).")
@click.option("--device", "-d", default=None, help="cpu, cuda (every visible GPU) or cuda:N (eval.device; eval.devices=[cuda:1,cuda:2] picks some).")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS", help="Evaluate on a Ray cluster: its address, `auto` for the one this machine is in, `local` to start one (eval.engine=ray).")
@click.option("--workers", "-w", type=click.IntRange(min=1), default=None, help="Candidate workers per device (eval.workers; default: one per core on a CPU, 4 on a GPU).")
@click.option("--no-cache", is_flag=True, help="Evaluate again even where the journal has a result.")
@click.option("--fuzz", "fuzz_examples", type=int, default=None, help="Fuzz examples per correct candidate (eval.fuzz); a failure makes it incorrect.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on standard output.")
@click.option(
    "--fail-under", type=click.FloatRange(0, 100), default=None, metavar="PERCENT",
    help="Exit with status 1 when the pass rate is below PERCENT (for scripts and CI).",
)
@config_options
def eval_command(config, problems_source, candidates_path, out_path, backend, device, ray_address, workers, no_cache, fuzz_examples, as_json, fail_under) -> None:
    """Evaluate candidates: sandboxed correctness trials, guards, and timing on a GPU.

    Exit status: 0, or 1 when --fail-under is given and the pass rate is below it;
    2 for a usage error (an unknown backend, no candidates, a bad option).
    """
    from kz_core.cli import FAILED, KzUsageError, apply_options, quiet_level, read_candidates, stderr, stdout
    from kz_core.evaluate import Evaluator, EvaluatorError
    from kz_core.evaluate.journal import Journal
    from kz_core.metrics import summarize
    from kz_core.problems import load_problems_from_config
    from kz_core.rundir import open_run_dir
    from kz_core.serialization import dumps, to_json_dict

    overrides = {
        "eval.backend": backend,
        "eval.device": device,
        "eval.workers": workers,
        "eval.cache": False if no_cache else None,
        "eval.fuzz": fuzz_examples,
        "eval.engine": "ray" if ray_address else None,
        "eval.ray_address": None if ray_address in (None, "local") else ray_address,
        "problems.source": problems_source,
        "run.name": config.run.name or f"eval-{Path(candidates_path).stem}",
    }
    config = apply_options(config, overrides)
    candidates = read_candidates(candidates_path, config.eval.backend)
    problem_set = load_problems_from_config(config.problems)
    for error in problem_set.errors:
        stderr.print(f"[yellow]problem skipped[/yellow] {error.name}: {error.reason}", highlight=False)
    if not problem_set.problems:
        raise KzUsageError(f"no problems found in {problem_set.source}: give --problems a problems folder (with .py files), a JSONL file or `examples`")
    run_dir = open_run_dir(config, command="kz eval")
    out = Path(out_path) if out_path else run_dir / "results.jsonl"
    verdicts: Counter[str] = Counter()
    with Journal(run_dir / "journal.sqlite") as journal:
        evaluator = Evaluator(problem_set.problems, config.eval, journal=journal)
        isolation = evaluator.isolation
        gaps = "; ".join(isolation.missing())
        stderr.print(f"sandbox: {isolation.summary()}" + (f" [yellow](missing: {gaps})[/yellow]" if gaps else ""), highlight=False)
        with evaluator, verdict_progress("eval", len(candidates), verdicts) as advance:
            try:
                results = evaluator.evaluate(candidates, progress=advance)
            except EvaluatorError as exc:
                raise KzUsageError(f"{exc} (finished results are kept in {run_dir / 'journal.sqlite'})") from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as handle:
        for result in results:
            handle.write(dumps(result) + "\n")
    summary = summarize(results, ks=(1, 5, 10))
    if as_json:
        click.echo(json.dumps(to_json_dict(summary), indent=2))
    else:
        failures = failures_table(results)
        if failures is not None and not quiet_level():
            stdout.print(failures)
        stdout.print(summary_table(summary, f"kz eval on {evaluator.device}"))
    if evaluator.reused:
        stderr.print(f"{evaluator.reused} of {len(results)} results came from the run's journal (--no-cache evaluates them again)", highlight=False)
    stderr.print(f"results: {out}  run directory: {run_dir}", highlight=False)
    if fail_under is not None and 100 * (summary.pass_rate or 0.0) < fail_under:
        stderr.print(f"[red]pass rate {100 * (summary.pass_rate or 0.0):.1f}% is below --fail-under {fail_under:g}%[/red]", highlight=False)
        sys.exit(FAILED)


@hookimpl
def register_commands(cli):
    cli.add_command(eval_command)
