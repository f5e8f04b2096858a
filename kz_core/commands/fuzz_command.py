"""``kz fuzz``: property-based fuzzing of candidates against their problems' references.

Each failing candidate's smallest failing example is saved to a case file in the run
directory, with the command that replays it (``--replay CASE``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click
from rich.table import Table

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl


def _case_name(problem: str, sample_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{problem}__{sample_id}") + ".json"


@click.command(name="fuzz")
@click.option("--problems", "-p", "problems_source", default=None, help="Problem source (problems.source).")
@click.option("--candidates", "-c", "candidates_path", required=True, type=click.Path(), help="Candidates: a .jsonl file or a folder of <problem>.py files.")
@click.option("--max-examples", "-n", type=int, default=100, show_default=True, help="Examples per candidate (before shrinking).")
@click.option("--seed", type=int, default=None, help="Hypothesis seed, for a repeatable run.")
@click.option("--dtypes", is_flag=True, help="Also fuzz input dtypes (float64, float16, bfloat16 where the reference accepts them).")
@click.option("--backend", "-b", default=None, help="Backend for candidates that name none (eval.backend).")
@click.option("--device", "-d", default=None, help="cpu, cuda or cuda:N (eval.device).")
@click.option("--replay", type=click.Path(exists=True, dir_okay=False), default=None, help="Replay one saved failing case.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@click.option("--no-cache", is_flag=True, help="Fuzz again even where the run's journal has a report.")
@config_options
def fuzz_command(config, problems_source, candidates_path, max_examples, seed, dtypes, backend, device, replay, as_json, no_cache) -> None:
    """Fuzz candidates: other sizes, value distributions and layouts, shrunk failures."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kz_core.cli import FAILED, KzUsageError, apply_options, read_candidates, stderr, stdout
    from kz_core.evaluate import Evaluator
    from kz_core.evaluate.journal import FuzzJournal, result_key
    from kz_core.fuzz import FuzzExample, FuzzFailure, FuzzSession
    from kz_core.problems import load_problems_from_config
    from kz_core.rundir import open_run_dir
    from kz_core.serialization import dumps, from_json_dict, to_json_dict

    overrides = {
        "eval.backend": backend,
        "eval.device": device,
        "problems.source": problems_source,
        "run.name": config.run.name or f"fuzz-{Path(candidates_path).stem}",
    }
    config = apply_options(config, overrides)
    candidates = read_candidates(candidates_path, config.eval.backend)
    problem_set = load_problems_from_config(config.problems)
    pairs = []
    for candidate in candidates:
        problem = problem_set.get(candidate.problem)
        if problem is None:
            stderr.print(f"[yellow]skipped[/yellow] {candidate.problem}/{candidate.sample_id}: no such problem in {problem_set.source}", highlight=False)
        else:
            pairs.append((problem, candidate))
    evaluator = Evaluator(problem_set.problems, config.eval)

    if replay:
        case = json.loads(Path(replay).read_text())
        match = [(p, c) for p, c in pairs if p.name == case["problem"] and c.sample_id == case["sample_id"]]
        if not match:
            evaluator.close()
            raise KzUsageError(f"no candidate {case['problem']}/{case['sample_id']} in {candidates_path}")
        example = from_json_dict(FuzzExample, case["example"])
        with evaluator, FuzzSession(*match[0], evaluator=evaluator) as session:
            try:
                session.check(example)
            except FuzzFailure as failure:
                stdout.print(f"[red]fails[/red] {failure}", highlight=False)
                sys.exit(FAILED)
            except Exception as exc:  # hypothesis.reject() outside a test: the reference refused it
                raise KzUsageError(f"the reference does not accept this example ({type(exc).__name__}): the case cannot be checked") from exc
        stdout.print(f"[green]passes[/green] at {example.describe()}", highlight=False)
        return

    run_dir = open_run_dir(config, command="kz fuzz")
    cases = run_dir / "cases"
    reports = []
    reused = 0
    with evaluator, FuzzJournal(run_dir / "journal.sqlite") as journal, Progress(
        TextColumn("[bold]fuzz[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=stderr
    ) as progress:
        task = progress.add_task("fuzz", total=len(pairs))
        for problem, candidate in pairs:
            # Same candidate, problem, evaluator settings, examples, seed and dtypes: the same report.
            key = result_key(evaluator.journal_key(candidate), "fuzz", str(max_examples), str(seed), str(dtypes))
            report = journal.get(key) if not no_cache else None
            if report is not None:
                reused += 1
            else:
                with FuzzSession(problem, candidate, evaluator=evaluator) as session:
                    report = session.run(max_examples, seed, dtypes)
                if not report.error:  # could not fuzz: try again next time
                    journal.put(key, report)
            reports.append(report)
            if report.example is not None:
                cases.mkdir(parents=True, exist_ok=True)
                path = cases / _case_name(problem.name, candidate.sample_id)
                path.write_text(json.dumps({**to_json_dict(report), "example": to_json_dict(report.example)}, indent=2) + "\n")
                replay_command = f"kz fuzz --problems {config.problems.source} --candidates {candidates_path} --replay {path}"
                report_line = f"{problem.name}/{candidate.sample_id}: {report.failure}\n  saved: {path}\n  replay: {replay_command}"
                stderr.print(report_line, highlight=False)
            progress.advance(task)
    if as_json:
        for report in reports:
            click.echo(dumps(report))
    else:
        table = Table(title=f"kz fuzz ({max_examples} examples per candidate)")
        for column in ("problem", "sample", "backend", "examples", "discarded", "result"):
            table.add_column(column)
        for report in reports:
            detail = (report.failure or report.error).splitlines()[0] if not report.passed else ""
            result = "[green]passed[/green]" if report.passed else f"[red]{'failed' if report.failure else 'error'}[/red]: {detail}"
            table.add_row(report.problem, report.sample_id, report.backend, str(report.examples), str(report.discarded), result)
        stdout.print(table)
    failed = sum(1 for r in reports if not r.passed)
    if reused:
        stderr.print(f"{reused} of {len(reports)} reports came from the run's journal (--no-cache fuzzes them again)", highlight=False)
    stderr.print(f"{len(reports) - failed} passed, {failed} failed; run directory: {run_dir}", highlight=False)
    if failed:
        sys.exit(FAILED)  # like pytest: a script or CI sees the failure


@hookimpl
def register_commands(cli):
    cli.add_command(fuzz_command)
