"""``kz check``: static checks and compilation only, for any backend; nothing runs.

Finds format errors, hacks the static guards see, and compiler errors (with the
compiler's log and line) before any GPU time is spent: NVRTC compiles CUDA on a CPU.
Triton compiles kernels at their first launch, so for Triton this checks the source and
its import; ``kz eval`` compiles and runs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click
from rich.table import Table

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl


@click.command(name="check")
@click.option("--problems", "-p", "problems_source", default=None, help="Problem source (problems.source).")
@click.option("--candidates", "-c", "candidates_path", required=True, type=click.Path(), help="Candidates: a .jsonl file or a folder of <problem>.py files.")
@click.option("--backend", "-b", default=None, help="Backend for candidates that name none (eval.backend).")
@click.option("--device", "-d", default="cpu", show_default=True, help="Where workers compile: cpu, or cuda[:N] to compile for that GPU.")
@click.option("--out", "-o", "out_path", default=None, type=click.Path(), help="Also write one JSON line per candidate here.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@config_options
def check_command(config, problems_source, candidates_path, backend, device, out_path, as_json) -> None:
    """Static checks and compilation only (no kernel runs): compile errors with their log."""
    from kz_core.cli import apply_options, read_candidates, stderr, stdout
    from kz_core.evaluate import Evaluator
    from kz_core.problems import load_problems_from_config
    from kz_core.serialization import dumps

    overrides = {"eval.backend": backend, "eval.device": device, "problems.source": problems_source}
    config = apply_options(config, overrides)
    candidates = read_candidates(candidates_path, config.eval.backend)
    problem_set = load_problems_from_config(config.problems)
    with Evaluator(problem_set.problems, config.eval) as evaluator:
        results = evaluator.check(candidates)
    if out_path:
        Path(out_path).write_text("".join(dumps(r) + "\n" for r in results), encoding="utf-8")
    if as_json:
        for result in results:
            click.echo(dumps(result))
    else:
        table = Table(title="kz check: static checks and compilation; nothing was run")
        table.add_column("problem", style="bold")
        table.add_column("sample")
        table.add_column("backend")
        table.add_column("status")
        table.add_column("details")
        for result in results:
            colour = "green" if result.status == "compiled" else "red"
            table.add_row(result.problem, result.sample_id, result.backend, f"[{colour}]{result.status}[/{colour}]", result.message)
        stdout.print(table)
        for result in results:
            logs = [f.message for f in result.findings if f.check == "compile_error" and "\n" in f.message]
            for log in logs:
                stdout.print(f"[bold]{result.problem} / {result.sample_id}[/bold]", highlight=False)
                stdout.print(log, highlight=False, markup=False)  # compiler logs hold [i] and the like
    counts = Counter(r.status for r in results)
    stderr.print(", ".join(f"{status} {count}" for status, count in sorted(counts.items())) + " (compiled means compiled, not run)", highlight=False)


@hookimpl
def register_commands(cli):
    cli.add_command(check_command)
