"""Run directories: one folder per run holding its resolved config, log file and journal.

``open_run_dir`` creates (or re-opens, for resuming) ``<run.root>/<run.name>``, writes
``config.yaml`` there and starts the log file. Re-opening a run keeps every file that
earlier attempts finished; a command that fails records why in the run's log, and a run
folder it created that holds nothing else is removed (``close_failed_runs``).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from loguru import logger

from kz_core.config import to_yaml
from kz_core.logs import add_log_file


#: Run folders the running command opened, and whether it created them (``close_failed_runs``;
#: the ``kz`` group forgets a command's entries when it ends).
OPENED: list[tuple[Path, bool]] = []
#: What a run folder holds as soon as it is opened: nothing a user would miss.
_BOOKKEEPING = {"config.yaml", "kz.log"}


def close_failed_runs(error: BaseException, since: int = 0) -> list[Path]:
    """After a command failed with ``error``: record it in the log of each run it opened
    (``OPENED[since:]``), and remove the run folders it created that hold nothing but their
    bookkeeping (so that a failed command leaves no empty run behind). Returns the folders
    removed."""
    import shutil

    removed = []
    # DEBUG: the file sink records it; the console already shows the error once.
    logger.debug("stopped: {}: {}", type(error).__name__, error)
    for run_dir, created in OPENED[since:]:
        try:
            names = {p.name for p in run_dir.iterdir() if not _empty_journal(p)}
        except OSError:
            continue
        if created and names <= _BOOKKEEPING:
            shutil.rmtree(run_dir, ignore_errors=True)
            removed.append(run_dir)
    return removed


def _empty_journal(path: Path) -> bool:
    """A journal file (or its SQLite companions) that holds no result yet."""
    if not path.name.startswith("journal.sqlite"):
        return False
    if path.name != "journal.sqlite":
        return True  # -wal, -shm: go with their database
    import sqlite3

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 0
    except sqlite3.Error:
        return False


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
    OPENED.append((run_dir, not resumed))
    (run_dir / "config.yaml").write_text(to_yaml(config), encoding="utf-8")
    if config.log.file:
        add_log_file(run_dir / config.log.file)
    logger.debug("{} run directory {} {}", "re-opened" if resumed else "created", run_dir, command)
    return run_dir
