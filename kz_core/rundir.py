"""Run directories: one folder per run holding its resolved config, log file and journal.

``open_run_dir`` creates (or re-opens, for resuming) ``<run.root>/<run.name>``, writes
``config.yaml`` there and starts the log file. Re-opening a run keeps every file that
earlier attempts finished; a command that fails records why in the run's log, and a run
folder it created that holds nothing else is removed (``close_failed_runs``).

Several processes of one run (the training processes of ``accelerate launch``) each open
it with their rank: rank 0 writes ``config.yaml`` and logs to ``log.file``; rank N logs to
its own file (``kz.rank<N>.log``) and writes nothing else here.
"""

from __future__ import annotations

import datetime
import re
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


def rank_log_name(name: str, rank: int) -> str:
    """The log file of process ``rank`` of a run whose log is ``name``: ``name`` itself for
    rank 0, ``kz.rank2.log`` for rank 2 of ``kz.log``."""
    if rank == 0:
        return name
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}.rank{rank}.{suffix}" if dot and stem else f"{name}.rank{rank}"


def _bookkeeping(name: str) -> bool:
    """A file every opened run folder holds (its config, its processes' logs)."""
    return name in _BOOKKEEPING or re.fullmatch(r"kz\.rank\d+\.log", name) is not None


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
        if created and all(_bookkeeping(name) for name in names):
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


def open_run_dir(config: Any, command: str = "", rank: int = 0) -> Path:
    """Create or re-open the run directory named by ``config.run``; returns its path.

    :param config: the resolved :class:`kz_core.config.KzConfig`.
    :param command: the command line that started the run, recorded in the log.
    :param rank: this process's rank among the run's processes (0 when it is alone).
        Rank 0 writes ``config.yaml`` and logs to ``log.file``; another rank logs to its
        own file (:func:`rank_log_name`) and writes nothing else. The caller lets rank 0
        open the folder first (the others wait for it), so that rank 0 alone creates it.
    """
    name = config.run.name or default_run_name()
    run_dir = Path(config.run.root) / name
    resumed = run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    OPENED.append((run_dir, not resumed))
    if rank == 0:
        (run_dir / "config.yaml").write_text(to_yaml(config), encoding="utf-8")
    if config.log.file:
        add_log_file(run_dir / rank_log_name(config.log.file, rank))
    logger.debug("{} run directory {} {}{}", "re-opened" if resumed else "created", run_dir, command, f" (process {rank})" if rank else "")
    return run_dir
