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
@click.option("--json", "as_json", is_flag=True, help="Print the summary, the explanation and the page's path as JSON.")
def report_command(run_dir: str, as_json: bool) -> None:
    """Write RUN_DIR/report/index.html (plots of rewards, gate, pool, frontier, held-out)."""
    from kz_core.cli import stderr
    from kz_core.report import load_run, write_report

    page = write_report(Path(run_dir))
    run = load_run(Path(run_dir))
    if as_json:
        click.echo(run_json(run, page))
        return
    print_summary(run)
    print_explanation(run)
    stderr.print(f"report: {page}", highlight=False)


@hookimpl
def register_commands(cli):
    cli.add_command(report_command)
