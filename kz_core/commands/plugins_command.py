"""``kz plugins``: every loaded plugin with its version, hooks and what it registered."""

from __future__ import annotations

import json

import click
from rich.table import Table

from kz_core.hookspecs import hookimpl


@click.command(name="plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--all", "show_all", is_flag=True, help="Include the core's own default plugins.")
def plugins_command(as_json: bool, show_all: bool) -> None:
    """List installed plugins: name, version, hooks, and the backends and sources they add."""
    from kz_core.cli import stdout
    from kz_core.plugins import failed_plugins, get_plugins, provided_by_plugin

    from kz_core.evaluate.isolation import support

    provided = provided_by_plugin()
    infos = [p for p in get_plugins() if show_all or not p.default]
    sandbox = support()
    if as_json:
        rows = [
            {
                "name": p.name,
                "version": p.version,
                "distribution": p.distribution,
                "default": p.default,
                "hooks": list(p.hooks),
                "provides": provided.get(p.name, []),
            }
            for p in infos
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="kz plugins" + ("" if show_all else " (--all adds the core's defaults)"))
    table.add_column("name", style="bold")
    table.add_column("version")
    table.add_column("hooks")
    table.add_column("provides")
    for p in infos:
        table.add_row(p.name, p.version, ", ".join(p.hooks), ", ".join(provided.get(p.name, [])))
    stdout.print(table)
    for name, error in failed_plugins().items():
        stdout.print(f"[red]failed to load[/red] {name}: {error}")
    # What the evaluator's sandbox can use on this machine (docs/security.md).
    stdout.print(f"sandbox for candidates: {sandbox.summary()}", highlight=False)
    for gap in sandbox.missing():
        stdout.print(f"  [yellow]missing:[/yellow] {gap}", highlight=False)


@hookimpl
def register_commands(cli):
    cli.add_command(plugins_command)
