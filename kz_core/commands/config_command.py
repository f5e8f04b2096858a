"""``kz config show``: the resolved configuration, after preset and overrides."""

from __future__ import annotations

import json

import click

from kz_core.cli import config_options
from kz_core.hookspecs import hookimpl


@click.group(name="config")
def config_group() -> None:
    """Inspect configuration."""


@config_group.command(name="show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
@click.option("--presets", "list_presets", is_flag=True, help="List the shipped presets instead.")
@click.option("--no-help", "no_help", is_flag=True, help="YAML without each key's help comment.")
@config_options
def show(config, as_json: bool, list_presets: bool, no_help: bool) -> None:
    """Print the resolved config: defaults, then --preset, then KEY=VALUE overrides, each
    key with its help (plugins' keys included) as a comment above it."""
    from kz_core.config import available_presets, to_container, to_yaml

    if list_presets:
        click.echo("\n".join(available_presets()))
    elif as_json:
        click.echo(json.dumps(to_container(config), indent=2))
    else:
        click.echo(to_yaml(config, with_help=not no_help), nl=False)


@hookimpl
def register_commands(cli):
    cli.add_command(config_group)
