"""The ``kz`` command line: a click group whose subcommands all come from plugins.

The core's own commands (``plugins``, ``config``, ``problems``, ...) are default plugins that
implement ``register_commands``, exactly as a third party's would. This module owns the
group, the options every command shares (``--preset``, ``key=value`` overrides, ``-v``/``-q``)
and the translation of expected failures into one clear message and exit status 2.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from kz_core import __version__
from kz_core.config import KzConfig, load_config
from kz_core.errors import KzError
from kz_core.logs import console_level, setup_logging

#: Results go to standard output; messages and progress to standard error. Piped to a file,
#: rich would fall back to 80 columns and cut tables' headers: there, tables get room.
PIPED_WIDTH = 200


def _console(stream: Any, **options: Any) -> Console:
    piped = not (hasattr(stream, "isatty") and stream.isatty())
    return Console(soft_wrap=True, width=PIPED_WIDTH if piped and "COLUMNS" not in os.environ else None, **options)


stdout = _console(sys.stdout)
stderr = _console(sys.stderr, stderr=True)


#: Exit statuses (the README's "Exit status" section): a failed check, a usage error, Ctrl-C.
FAILED = 1
USAGE = 2
INTERRUPTED = 130


class KzUsageError(KzError, click.ClickException):
    """An expected failure: printed as one line starting with 'kz:', exit status 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"kz: {self.format_message()}", err=True)


class KzGroup(click.Group):
    """The ``kz`` group: a :class:`~kz_core.errors.KzError` raised by any command, the
    core's or a plugin's, ends it as a usage error (one line ``kz: ...``, the error's exit
    status), caught here once for every command."""

    def invoke(self, ctx: click.Context) -> Any:
        from kz_core.rundir import OPENED, close_failed_runs

        since = len(OPENED)  # run folders opened before this command (a process running several) are not its own
        try:
            return self._invoke(ctx, since)
        finally:
            del OPENED[since:]

    def _invoke(self, ctx: click.Context, since: int) -> Any:
        from kz_core.rundir import close_failed_runs

        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            close_failed_runs(exc, since)
            interrupted = KzUsageError(
                "interrupted. Finished work is kept in the run folder (evaluation results in its "
                "journal, training checkpoints): run the same command again to resume."
            )
            interrupted.exit_code = INTERRUPTED
            raise interrupted from None
        except KzError as exc:
            close_failed_runs(exc, since)
            if isinstance(exc, click.ClickException):
                raise
            usage = KzUsageError(str(exc))
            usage.exit_code = exc.exit_code
            raise usage from exc
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as exc:  # a crash: its traceback goes to the console, the reason to the run's log
            close_failed_runs(exc, since)
            raise


def _count_option(name: str, short: str, help_text: str) -> Callable:
    return click.option(short, f"--{name}", count=True, expose_value=True, help=help_text)


@click.group(cls=KzGroup, context_settings={"help_option_names": ["-h", "--help"]})
@_count_option("verbose", "-v", "Show debug messages.")
@_count_option("quiet", "-q", "Show warnings and errors only (-qq: errors only).")
@click.version_option(__version__, prog_name="kz")
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: int) -> None:
    """kz: train and evaluate language models that write fast, correct GPU kernels.

    Every command accepts --preset NAME and key=value config overrides
    (see `kz config show`).
    """
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
    ctx.obj["quiet"] = quiet
    setup_logging(console_level(verbose, quiet))


def config_options(command: Callable) -> Callable:
    """Give a command ``--preset``, ``-v``/``-q`` and ``key=value`` overrides.

    The wrapped function receives ``config`` (the resolved :class:`KzConfig`) instead of
    ``preset`` and ``overrides``; logging is set from ``log.level`` and the -v/-q counts.
    """

    @click.option("--preset", default=None, metavar="NAME", help="A shipped preset's name or a YAML file's path.")
    @_count_option("verbose", "-v", "Show debug messages.")
    @_count_option("quiet", "-q", "Show warnings and errors only.")
    @click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
    @functools.wraps(command)
    def wrapper(*args: Any, preset: str | None, overrides: tuple[str, ...], verbose: int, quiet: int, **kwargs: Any) -> Any:
        config = resolve_config(preset, overrides)
        ctx = click.get_current_context()
        root = ctx.find_root().obj or {}
        verbose += root.get("verbose", 0)
        quiet += root.get("quiet", 0)
        if isinstance(ctx.find_root().obj, dict):
            ctx.find_root().obj["quiet_total"] = quiet
        setup_logging(console_level(verbose, quiet, default=config.log.level))
        return command(*args, config=config, **kwargs)

    return wrapper


def quiet_level() -> int:
    """How many -q the running command was given (before or after its name)."""
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root().obj if ctx is not None else None
    return int(root.get("quiet_total", root.get("quiet", 0))) if isinstance(root, dict) else 0


def resolve_config(preset: str | None, overrides: tuple[str, ...] | list[str]) -> KzConfig:
    """``load_config`` (a bad preset or override is a :class:`~kz_core.config.ConfigError`,
    which the group reports as a usage error)."""
    return load_config(preset, list(overrides))


def apply_options(config: KzConfig, options: dict[str, Any]) -> KzConfig:
    """``config`` with a command's own options merged in (``{"eval.device": value}``; a
    None value is an option not given)."""
    from omegaconf import OmegaConf

    return OmegaConf.merge(config, OmegaConf.from_dotlist([f"{k}={v}" for k, v in options.items() if v is not None]))


def read_candidates(path: str, backend: str) -> list[Any]:
    """The candidates in ``path`` (JSONL, a ``.py`` file or a folder; ``backend`` where they
    name none). A source that cannot be read, holds no candidate or names a backend no
    plugin provides is a usage error (before anything runs); bad lines are reported and
    skipped."""
    from kz_core.candidates import load_candidates

    from kz_core.plugins import backends

    candidates, bad_lines = load_candidates(path, backend)
    shown = 10
    for error in bad_lines[:shown]:
        stderr.print(f"[yellow]skipped[/yellow] {error.where}: {error.reason}", highlight=False)
    if len(bad_lines) > shown:
        stderr.print(f"[yellow]skipped[/yellow] {len(bad_lines) - shown} more malformed lines", highlight=False)
    installed = backends()
    unknown = sorted({c.backend for c in candidates} - set(installed))  # the default counts where used
    if unknown:
        raise KzUsageError(
            f"unknown backend {', '.join(map(repr, unknown))}: installed backends are {', '.join(sorted(installed)) or 'none'} "
            "(`kz plugins` lists them; a backend's plugin may be missing)"
        )
    return candidates


def _register_commands() -> None:
    from kz_core.plugins import get_plugin_manager

    pm = get_plugin_manager()
    if not getattr(cli, "_kz_commands_registered", False):
        pm.hook.register_commands(cli=cli)
        cli._kz_commands_registered = True  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> Any:
    """Entry point of the ``kz`` console script: a :class:`~kz_core.errors.KzError` from any
    command, the core's or a plugin's, is one line ``kz: ...`` and its exit status."""
    setup_logging("INFO")
    try:
        _register_commands()  # a plugin that cannot load is a PluginError
        return cli.main(args=argv, prog_name="kz")
    except KzError as exc:
        click.echo(f"kz: {exc}", err=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
