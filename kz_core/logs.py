"""Logging with loguru: the console at the chosen level, and a log file in the run directory.

Library code logs through ``from loguru import logger``; only the CLI (and tests) call
:func:`setup_logging`. Nothing here decides what to log.
"""

from __future__ import annotations

import sys
from pathlib import Path

from loguru import logger

CONSOLE_FORMAT = "<level>{level: <7}</level> {message}"
FILE_FORMAT = "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <7} | {process} | {name}:{line} | {message}"

_console_sink: int | None = None


def console_level(verbose: int, quiet: int, default: str = "INFO") -> str:
    """The console level for ``-v``/``-q`` counts: -v DEBUG, -q WARNING, -qq ERROR."""
    if verbose:
        return "DEBUG"
    if quiet >= 2:
        return "ERROR"
    if quiet == 1:
        return "WARNING"
    return default.upper()


def setup_logging(level: str = "INFO") -> None:
    """Send log records at ``level`` and above to standard error (replaces earlier setup)."""
    global _console_sink
    logger.remove()
    _console_sink = logger.add(sys.stderr, level=level.upper(), format=CONSOLE_FORMAT, colorize=None)


def add_log_file(path: Path) -> int:
    """Also write every record (DEBUG and above) to ``path``; returns the sink id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return logger.add(path, level="DEBUG", format=FILE_FORMAT, enqueue=False, encoding="utf-8")
