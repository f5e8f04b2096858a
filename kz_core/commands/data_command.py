"""``kz data synth``: verified Coder and Proposer pairs for a supervised warm start.

Writes JSON lines (``prompt`` and ``completion`` in chat form, exactly the prompts GRPO
uses, with provenance per row) that ``kz train sft`` and Hugging Face ``datasets`` read.
Exits 1 when no pair survived verification, 2 on a usage error.
"""

from __future__ import annotations

import json

import click
from rich.table import Table

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl


def report_table(report) -> Table:
    table = Table(title=f"kz data synth: {report.rows} verified pairs from {report.problems} problems in {report.seconds:.0f} s")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("[bold]Coder pairs[/bold] (kernel correct, or compiled where it cannot run)", str(report.coder_rows))
    table.add_row("[bold]Proposer pairs[/bold] (module valid)", str(report.proposer_rows))
    for family, count in sorted(report.by_family.items()):
        table.add_row(f"  family {family}", str(count))
    for split, count in sorted(report.by_split.items()):
        table.add_row(f"  split {split}", str(count))
    table.add_row("problems dropped as near-duplicates", str(report.duplicates))
    table.add_row("problems dropped as contaminated", str(report.contaminated))
    for reason, count in sorted(report.rejected.items()):
        table.add_row(f"pairs dropped: {reason}", str(count))
    return table


@click.group(name="data")
def data() -> None:
    """Training data: synthetic, verified pairs for supervised warm starts."""


@data.command(name="synth")
@click.option("--n", "-n", "count", type=int, default=200, show_default=True, help="Problems to draw (each gives up to one pair per backend and a Proposer pair).")
@click.option("--out", "out_path", default=None, help="JSONL to write (default: <run directory>/synth.jsonl).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the draw; the same seed gives the same problems.")
@click.option("--backends", default="triton,cuda", show_default=True, help="Kernel backends, comma-separated.")
@click.option("--families", default="", help="Op families to draw from, comma-separated (default: all).")
@click.option("--heldout", default="softmax", show_default=True, help="Families that go to the heldout split only (disjoint by op family).")
@click.option("--per-structure", type=int, default=3, show_default=True, help="Problems kept per normalised source (others differ only in sizes).")
@click.option("--no-proposer", is_flag=True, help="Coder pairs only.")
@click.option("--device", "-d", default=None, help="Where kernels are checked: cpu, cuda or cuda:N (eval.device).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@config_options
def synth_command(config, count, out_path, seed, backends, families, heldout, per_structure, no_proposer, device, as_json) -> None:
    """Draw problems from the API catalog's operations, write Triton and CUDA kernels for
    them, keep the pairs the evaluator and module validation accept."""
    from pathlib import Path

    from omegaconf import OmegaConf
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kz_core.cli import KzUsageError, stderr, stdout
    from kz_core.rundir import open_run_dir
    from kz_core.serialization import to_json_dict
    from kz_core.synth.generate import synthesize_dataset
    from kz_core.synth.templates import FAMILIES

    if count < 1:
        raise KzUsageError("--n must be at least 1")
    overrides = ["eval.timing=false", "eval.cache=false"] + ([f"eval.device={device}"] if device else [])
    if not config.run.name:
        overrides.append("run.name=synth")
    config = OmegaConf.merge(config, OmegaConf.from_dotlist(overrides))
    chosen = [f.strip() for f in families.split(",") if f.strip()] or list(FAMILIES)
    held = [f.strip() for f in heldout.split(",") if f.strip()]
    wanted = [b.strip() for b in backends.split(",") if b.strip()]
    unknown = set(wanted) - {"triton", "cuda"}
    if unknown:
        raise KzUsageError(f"--backends: no templates for {', '.join(sorted(unknown))}; use triton and/or cuda")
    run_dir = open_run_dir(config, command="kz data synth")
    out = Path(out_path) if out_path else run_dir / "synth.jsonl"
    with Progress(TextColumn("[bold]{task.description}[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=stderr) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(f"checking {stage}", total=total)
            bar.update(tasks[stage], completed=done)

        report = synthesize_dataset(
            config, count=count, out=out, seed=seed, backends=wanted, families=chosen, heldout=held,
            proposer=not no_proposer, per_structure=per_structure, progress=progress,
        )
    if as_json:
        click.echo(json.dumps(to_json_dict(report), indent=2))
    else:
        stdout.print(report_table(report))
    stderr.print(f"pairs: {out}", highlight=False)
    for split, path in report.problem_files.items():
        stderr.print(f"{split} problems (for kz generate -p, kz train coder -p): {path}", highlight=False)
    if report.rows == 0:
        raise SystemExit(1)


@hookimpl
def register_commands(cli):
    cli.add_command(data)
