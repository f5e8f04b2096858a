"""``kz problems list`` and ``kz problems show``: what a problem source holds.

Both read problem text only; neither runs a problem. Malformed problems are reported with
their name and reason, and the rest are listed.
"""

from __future__ import annotations

import difflib
import json

import click
from rich.syntax import Syntax
from rich.table import Table

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl


def _source_options(command):
    command = click.option("--name", "name_pattern", default=None, help="Keep names matching this glob (or substring).")(command)
    command = click.option("--ids", default=None, help="Keep these problem ids, e.g. 1-10,15.")(command)
    command = click.option("--level", type=int, default=None, help="Keep this KernelBench level.")(command)
    command = click.option(
        "--source", "-s", default=None, help="Folder, .py/.jsonl file, hf:DATASET or 'examples' (problems.source)."
    )(command)
    return command


def _load(config, source, level, ids, name_pattern):
    from kz_core.cli import KzUsageError
    from kz_core.problems import load_problems

    try:
        return load_problems(
            source if source is not None else config.problems.source,
            level=level if level is not None else config.problems.level,
            ids=ids if ids is not None else config.problems.ids,
            name=name_pattern if name_pattern is not None else config.problems.name,
        )
    except ValueError as exc:  # a bad --ids list
        raise KzUsageError(str(exc)) from exc


def _report_errors(problem_set) -> None:
    from kz_core.cli import stderr

    for error in problem_set.errors:
        stderr.print(f"[yellow]skipped[/yellow] {error.name} ({error.source}): {error.reason}", highlight=False)


@click.group(name="problems")
def problems_group() -> None:
    """List and show problems from a problem source."""


@problems_group.command(name="list")
@_source_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@config_options
def list_problems(config, source, level, ids, name_pattern, as_json) -> None:
    """List the problems in a source, after filters; report malformed ones."""
    from kz_core.cli import stderr, stdout

    problem_set = _load(config, source, level, ids, name_pattern)
    _report_errors(problem_set)
    if as_json:
        for p in problem_set.problems:
            click.echo(json.dumps({"name": p.name, "level": p.level, "problem_id": p.problem_id, "hash": p.content_hash[:12]}))
    else:
        table = Table(title=f"problems in {problem_set.source}")
        table.add_column("name", style="bold")
        table.add_column("level", justify="right")
        table.add_column("id", justify="right")
        table.add_column("lines", justify="right")
        for p in problem_set.problems:
            table.add_row(
                p.name,
                "" if p.level is None else str(p.level),
                "" if p.problem_id is None else str(p.problem_id),
                str(p.code.count("\n") + 1),
            )
        stdout.print(table)
    summary = f"{len(problem_set.problems)} problems"
    if problem_set.errors:
        summary += f", {len(problem_set.errors)} malformed (skipped, listed above)"
    stderr.print(summary, highlight=False)


@problems_group.command(name="audit")
@_source_options
@click.option("--device", "-d", default=None, help="cpu, cuda or cuda:N (eval.device).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@config_options
def audit_problems_command(config, source, level, ids, name_pattern, device, as_json) -> None:
    """Flag problems a cheater can pass: constant or input-independent outputs,
    non-deterministic or TF32-sensitive references, non-finite outputs."""
    from collections import Counter

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kz_core.cli import stderr, stdout
    from kz_core.evaluate import resolve_device
    from kz_core.evaluate.audit import audit_problems
    from kz_core.serialization import to_json_dict

    problem_set = _load(config, source, level, ids, name_pattern)
    _report_errors(problem_set)
    resolved = resolve_device(device or config.eval.device)
    with Progress(TextColumn("[bold]audit[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=stderr) as progress:
        task = progress.add_task("audit", total=len(problem_set.problems))
        audits = audit_problems(problem_set.problems, config.eval, resolved, progress=lambda _: progress.advance(task))
    if as_json:
        click.echo(json.dumps([to_json_dict(a) for a in audits], indent=2))
        return
    table = Table(title=f"problem audit on {resolved} (tolerance {config.eval.tolerance})")
    table.add_column("problem", style="bold")
    table.add_column("flags")
    table.add_column("details")
    for audit in audits:
        table.add_row(audit.problem, ", ".join(audit.flags) or "[green]ok[/green]", "; ".join(f.message for f in audit.findings))
    stdout.print(table)
    counts = Counter(flag for audit in audits for flag in audit.flags)
    flagged = sum(1 for audit in audits if audit.flags)
    stderr.print(f"{flagged} of {len(audits)} problems flagged" + (": " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) if counts else ""), highlight=False)


@problems_group.command(name="show")
@click.argument("problem_name", metavar="NAME")
@_source_options
@config_options
def show_problem(config, problem_name, source, level, ids, name_pattern) -> None:
    """Print one problem's source and metadata."""
    from kz_core.cli import KzUsageError, stdout

    problem_set = _load(config, source, level, ids, name_pattern)
    problem = problem_set.get(problem_name)
    if problem is None:
        broken = next((e for e in problem_set.errors if e.name == problem_name), None)
        if broken is not None:
            raise KzUsageError(f"problem {problem_name!r} is malformed: {broken.reason}")
        close = difflib.get_close_matches(problem_name, problem_set.names(), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `kz problems list` shows the names"
        raise KzUsageError(f"no problem named {problem_name!r} in {problem_set.source}{hint}")
    stdout.print(
        f"[bold]{problem.name}[/bold]  level={problem.level}  id={problem.problem_id}  "
        f"sha256={problem.content_hash[:16]}  source={problem.source}",
        highlight=False,
    )
    stdout.print(Syntax(problem.code, "python", line_numbers=True))


@hookimpl
def register_commands(cli):
    cli.add_command(problems_group)
