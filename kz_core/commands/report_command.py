"""``kz report RUN_DIR``: an HTML page with plots of a run, and its summary table."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from kz_core.hookspecs import hookimpl


def run_json(run, page: Path | None) -> str:
    """A run's summary, its explanation, its rounds and the page's path, as JSON
    (``kz report --json``, ``kz train --json``)."""
    from kz_core.report import explain, summary_rows

    return json.dumps({"summary": dict(summary_rows(run)), "what_happened": explain(run), "report": str(page) if page else None, "rounds": list(run.rounds)}, indent=2)


def print_summary(run) -> None:
    """The run's summary table on standard output."""
    from kz_core.cli import stdout
    from kz_core.report import summary_rows

    table = Table(title="kz run summary")
    table.add_column("")
    table.add_column("value", justify="right")
    for label, value in summary_rows(run):
        table.add_row(label, value)
    stdout.print(table)


def print_explanation(run) -> None:
    """What happened in the run, a line each (``kz_core.report.explain``)."""
    from kz_core.cli import stdout
    from kz_core.report import explain

    for line in explain(run):
        stdout.print(f"- {line}", highlight=False)


@click.command(name="report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("more_runs", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary, the explanation and the page's path as JSON.")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None, help="With several runs: the comparison's folder (default: compare/ beside the first run).")
def report_command(run_dir: str, more_runs: tuple[str, ...], as_json: bool, out: str | None) -> None:
    """Write RUN_DIR/report/index.html (plots of rewards, gate, pool, frontier, held-out).

    With several runs (kz report RUN_A RUN_B ...): each run's own page, and a comparison
    page that overlays their Coder steps (reward, correctness, speed) with a table of each
    run's first, last and mean values, for ablations."""
    from kz_core.cli import stderr
    from kz_core.report import load_run, write_report

    if more_runs:
        _compare([run_dir, *more_runs], out, as_json)
        return

    page = write_report(Path(run_dir))
    run = load_run(Path(run_dir))
    if as_json:
        click.echo(run_json(run, page))
        return
    print_summary(run)
    print_explanation(run)
    stderr.print(f"report: {page}", highlight=False)


def _compare(run_dirs: list[str], out: str | None, as_json: bool) -> None:
    from kz_core.cli import stderr, stdout
    from kz_core.report import compare_rows, load_run, write_comparison, write_report

    for run_dir in run_dirs:
        write_report(Path(run_dir))
    folder = Path(out) if out else Path(run_dirs[0]).resolve().parent / "compare"
    runs = [load_run(Path(d)) for d in run_dirs]
    page = write_comparison(runs, folder)
    rows = compare_rows(runs)
    if as_json:
        click.echo(json.dumps({"runs": rows, "report": str(page)}, indent=2))
        return
    columns = ("run", "steps", "correct_rate first", "correct_rate last", "speedup_geomean first", "speedup_geomean last", "reward mean", "held-out pass@1")
    table = Table(title="kz runs compared (Coder steps)")
    for column in columns:
        table.add_column(column, justify="left" if column == "run" else "right")
    for row in rows:
        table.add_row(*("-" if row[c] is None else f"{row[c]:.3f}" if isinstance(row[c], float) else str(row[c]) for c in columns))
    stdout.print(table)
    stderr.print(f"report: {page}", highlight=False)


@hookimpl
def register_commands(cli):
    cli.add_command(report_command)
