"""``kz train``: co-evolution of the Proposer and the Coder (``kz_core/coevolve.py``).

The core owns the ``train`` group, a module-level object (``kz_core.train_group``) that
plugins add their subcommands to in their own ``register_commands``, in any order:
kz-policy-hf adds ``kz train coder``, ``kz train proposer`` and ``kz train sft``. Without a subcommand, ``kz train [--preset NAME] [key=value ...]``
runs (or resumes) co-evolution rounds in the run directory, then prints the summary
table, one row per round, and the path of the HTML report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl

#: Run name when ``run.name`` is empty (``-<preset>`` is appended), so that re-running the
#: same command resumes the same run.
DEFAULT_RUN_NAME = "coevolve"


class TrainGroup(click.Group):
    """A group that runs its own callback with ``key=value`` arguments when the first
    argument names no subcommand, and hands everything to the subcommand when it does."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and "=" not in args[0] and args[0] not in self.commands:
            from kz_core.cli import KzUsageError

            installed = ", ".join(sorted(self.commands)) or "none"
            raise KzUsageError(
                f"no command `kz train {args[0]}` (installed: {installed}); `coder`, `proposer` and `sft` come "
                "with kz-policy-hf (pip install -e plugins/policy_hf, or its wheel from `make dist`)"
            )
        if args and args[0] in self.commands:
            super().parse_args(ctx, [])  # the group's own options keep their defaults
            if hasattr(ctx, "_protected_args"):  # click >= 8.2
                ctx._protected_args, ctx.args = args[:1], args[1:]
            else:  # pragma: no cover - click 8.1
                ctx.protected_args, ctx.args = args[:1], args[1:]
            return ctx.args
        return super().parse_args(ctx, args)


def _percent(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def rounds_table(rounds: list[dict[str, Any]]) -> Table:
    """One row per round: the pool, the frontier, the held-out metrics."""
    table = Table(title="kz train: co-evolution rounds (pass@k, fast_1: held-out problems)")
    columns = ("round", "pool valid/all", "API cover", "0<p<1", "pass@1", "pass@k", "fast_1 eager", "fast_1 compile")
    for column in columns:
        table.add_column(column, justify="right")
    for row in rounds:
        heldout, frontier = row.get("heldout", {}), row.get("frontier", {})
        k = row.get("heldout_samples", {}).get("per_problem")
        table.add_row(
            str(row.get("round")),
            f"{row.get('pool_valid', 0)} / {row.get('pool_size', 0)}",
            _percent(frontier.get("api_coverage")),
            _percent(frontier.get("intermediate_share")),
            _percent(heldout.get("pass@1")),
            _percent(heldout.get("pass@k")) + (f" (k={k})" if k else ""),
            _percent(heldout.get("fast_1_eager")),
            _percent(heldout.get("fast_1_compile")),
        )
    return table


@click.group(name="train", cls=TrainGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the rounds, the summary and the explanation as JSON at the end.")
@config_options
@click.pass_context
def train_group(ctx: click.Context, config: Any, as_json: bool) -> None:
    """Co-evolve the Proposer and the Coder (coevolve.*); `kz train coder|proposer|sft` trains one.

    Each round: Proposer training, pool refresh, frontier statistics, Coder training on
    the frontier, held-out evaluation. Re-running the same command resumes the run.
    """
    if ctx.invoked_subcommand is not None:
        return
    from omegaconf import OmegaConf

    from kz_core.cli import stderr, stdout
    from kz_core.coevolve import run_coevolution
    from kz_core.commands.report_command import print_explanation, print_summary, run_json
    from kz_core.report import load_run, write_report
    from kz_core.rundir import open_run_dir

    preset = ctx.params.get("preset")
    if not config.run.name:
        name = DEFAULT_RUN_NAME + (f"-{Path(preset).stem}" if preset else "")
        config = OmegaConf.merge(config, OmegaConf.from_dotlist([f"run.name={name}"]))
    run_dir = open_run_dir(config, command="kz train")
    stderr.print(f"co-evolution: {config.coevolve.rounds} rounds in {run_dir}", highlight=False)
    rounds = run_coevolution(config, run_dir)
    try:
        page = write_report(run_dir)
    except ImportError as exc:  # matplotlib is a dependency, but an image may lack it
        stderr.print(f"the rounds are done, but the report was not written ({exc}): install matplotlib, then run `kz report {run_dir}`")
        page = None
    run = load_run(run_dir)
    if as_json:
        click.echo(run_json(run, page))
        return
    print_summary(run)
    if rounds:
        stdout.print(rounds_table(rounds))
    print_explanation(run)
    if page is not None:
        stderr.print(f"report: {page}", highlight=False)


@hookimpl
def register_commands(cli):
    cli.add_command(train_group)
