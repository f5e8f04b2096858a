"""A SQLite file shared by the threads of one process: the base of the evaluation journal,
the baseline cache (``kz_core.evaluate.journal``) and the module pool
(``kz_core.proposer.pool``)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any


class SqliteStore:
    """A SQLite file shared by threads, with a write committed per call; a context manager.
    Subclasses set ``SCHEMA`` and use ``_db`` under ``_lock``."""

    SCHEMA = ""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(self.SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
