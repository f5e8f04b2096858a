"""``kz propose``: the Proposer writes modules for frontier-weighted API sets; they are
validated in sandboxed workers and added to the run's module pool (``pool.sqlite``).

Prints the valid share, the invalid modules counted by the check that rejected them, and
how many catalog APIs the valid modules cover; ``--json`` prints the same as JSON. Every
module, with its findings, also goes to ``modules.jsonl`` in the run directory.
"""

from __future__ import annotations

import json

import click
from rich.table import Table

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl

#: Run name when ``run.name`` is empty: re-runs add rounds to the same pool.
DEFAULT_RUN_NAME = "propose"


def summary_table(summary) -> Table:
    """Validity by reason for one round, and the APIs it covered."""
    table = Table(title=f"kz propose: round {summary.round}, {summary.proposed} modules")
    for column in ("outcome", "modules", "share"):
        table.add_column(column, justify="left" if column == "outcome" else "right")

    def share(count: int) -> str:
        return f"{100 * count / summary.proposed:.0f}%" if summary.proposed else "-"

    table.add_row("[bold]valid[/bold]", str(summary.valid), share(summary.valid))
    for reason, count in summary.invalid_by_reason.items():
        table.add_row(f"invalid: {reason}", str(count), share(count))
    table.add_row("APIs requested / covered by valid modules", f"{summary.apis_requested} / {summary.apis_covered}", f"of {summary.catalog_size}")
    table.add_row("pool: valid / all modules", f"{summary.pool_valid} / {summary.pool_size}", "")
    return table


@click.command(name="propose")
@click.option("--n", "-n", "n", type=int, default=8, show_default=True, help="Modules to propose (one per sampled API set).")
@click.option("--device", "-d", default=None, help="Where modules are validated: cpu, cuda or cuda:N (eval.device).")
@click.option("--json", "as_json", is_flag=True, help="Print the round's summary as JSON.")
@config_options
def propose_command(config, n, device, as_json) -> None:
    """Propose modules with the Proposer policy, validate them, add them to the pool."""
    from omegaconf import OmegaConf

    from kz_core.cli import KzUsageError, stderr, stdout
    from kz_core.plugins import get_plugin_manager
    from kz_core.proposer.pool import open_pool
    from kz_core.proposer.propose import propose_round
    from kz_core.rundir import open_run_dir
    from kz_core.serialization import to_json_dict

    if n < 1:
        raise KzUsageError("--n must be at least 1")
    if not config.run.name:
        config = OmegaConf.merge(config, OmegaConf.from_dotlist([f"run.name={DEFAULT_RUN_NAME}"]))
    run_dir = open_run_dir(config, command="kz propose")
    with open_pool(run_dir) as pool:
        validations, summary = propose_round(n, config, pool, get_plugin_manager(), device=device)
    with (run_dir / "modules.jsonl").open("a", encoding="utf-8") as handle:
        for name, validation in zip(summary.names, validations):
            record = {**to_json_dict(validation), "name": name, "round": summary.round, "reason": validation.reason}
            handle.write(json.dumps(record) + "\n")
    if as_json:
        click.echo(json.dumps({**to_json_dict(summary), "valid_share": summary.valid_share, "run_dir": str(run_dir)}, indent=2))
    else:
        stdout.print(summary_table(summary))
    stderr.print(f"{summary.valid} of {summary.proposed} valid; pool: {run_dir / 'pool.sqlite'}", highlight=False)


@hookimpl
def register_commands(cli):
    cli.add_command(propose_command)
