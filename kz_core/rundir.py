"""Run directories: one folder per run holding its resolved config, log file and journal.

``open_run_dir`` creates (or re-opens, for resuming) ``<run.root>/<run.name>``, writes
``config.yaml`` there and starts the log file. It never deletes anything: re-opening a run
keeps every file that earlier attempts finished.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from loguru import logger

from kz_core.config import to_yaml
from kz_core.logs import add_log_file


def default_run_name(now: datetime.datetime | None = None) -> str:
    return (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")


def open_run_dir(config: Any, command: str = "") -> Path:
    """Create or re-open the run directory named by ``config.run``; returns its path.

    :param config: the resolved :class:`kz_core.config.KzConfig`.
    :param command: the command line that started the run, recorded in the log.
    """
    name = config.run.name or default_run_name()
    run_dir = Path(config.run.root) / name
    resumed = run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(to_yaml(config), encoding="utf-8")
    if config.log.file:
        add_log_file(run_dir / config.log.file)
    logger.debug("{} run directory {} {}", "re-opened" if resumed else "created", run_dir, command)
    return run_dir
