"""A SQLite file shared by the threads of one process, and by the processes of one machine
(the training processes of ``accelerate launch`` share their run's journal): the base of the
evaluation journal, the baseline cache (``kz_core.evaluate.journal``) and the module pool
(``kz_core.proposer.pool``). SQLite's own file locks serialise the writers of several
processes; each write is one committed statement, and a writer waits up to
:data:`BUSY_TIMEOUT_S` for another's. Its locks need a local file system (not NFS).

Model-written code never reaches these files (the sandbox keeps run folders and the cache
out of its sight), and a file that was tampered with all the same (by another program, or
on a machine without Landlock) is opened defensively: triggers and views, which kz never
creates, are dropped before any query runs, and the journal and baseline cache sign each
row (:func:`row_mac`) and ignore rows whose signature does not match.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from loguru import logger

_KEY_FILE = "rows.key"
#: Seconds a connection waits for another process's lock before "database is locked".
BUSY_TIMEOUT_S = 30.0
_key_lock = threading.Lock()
_keys: dict[Path, bytes] = {}


def _row_key() -> bytes:
    """This user's secret for signing rows, in the kz cache folder (mode 0600), read once
    per process. A new key is written whole under a temporary name and linked into place,
    so that processes creating it at the same time all end up with the one that won."""
    from kz_core.paths import cache_dir

    path = cache_dir(create=True) / _KEY_FILE
    with _key_lock:
        if path in _keys:
            return _keys[path]
        try:
            key = path.read_bytes()
        except FileNotFoundError:
            key = b""
        if len(key) != 32:
            if key:  # unreadable or cut short: nothing signed with it can be checked anyway
                path.unlink(missing_ok=True)
            partial = path.with_name(f".{_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, secrets.token_bytes(32))
            finally:
                os.close(fd)
            try:
                os.link(partial, path)
            except FileExistsError:
                pass  # another process linked its key first: use that one
            finally:
                partial.unlink(missing_ok=True)
            key = path.read_bytes()
        _keys[path] = key
        return key


def row_mac(*parts: str) -> str:
    """The signature of a stored row's fields (HMAC-SHA256 with this user's key)."""
    message = "\x1f".join(parts).encode("utf-8")
    return hmac.new(_row_key(), message, hashlib.sha256).hexdigest()


def mac_matches(mac: str | None, *parts: str) -> bool:
    return bool(mac) and hmac.compare_digest(str(mac), row_mac(*parts))


class SqliteStore:
    """A SQLite file shared by threads, with a write committed per call; a context manager.
    Subclasses set ``SCHEMA`` and use ``_db`` under ``_lock``."""

    SCHEMA = ""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        self._db.execute("PRAGMA trusted_schema=OFF")
        self._drop_foreign_objects()
        self._use_write_ahead_log()
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(self.SCHEMA)
        self._migrate()

    def _use_write_ahead_log(self) -> None:
        """Switch the file to write-ahead logging (readers go on while one process writes).
        When several connections open a new file at once, each wants the exclusive lock the
        switch takes, and SQLite answers "database is locked" to all but one at once, without
        waiting (it would deadlock otherwise): those try again until :data:`BUSY_TIMEOUT_S`."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        pause = 0.005
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 0.2)

    def _drop_foreign_objects(self) -> None:
        """Drop triggers and views: kz creates none, so one found here was planted."""
        rows = self._db.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')").fetchall()
        for kind, name in rows:
            logger.warning("{}: dropping a {} kz did not create ({!r})", self.path, kind, name)
            quoted = '"' + str(name).replace('"', '""') + '"'
            self._db.execute(f"DROP {'TRIGGER' if kind == 'trigger' else 'VIEW'} IF EXISTS {quoted}")

    def _migrate(self) -> None:
        """Bring an older file's tables up to ``SCHEMA`` (subclasses add columns)."""

    def _signed_text(self, table: str, column: str, key: str) -> str | None:
        """``column`` of ``table``'s row ``key`` (tables with ``key`` and ``mac`` columns);
        a row whose signature does not match (kz did not write it) counts as absent.
        ``table`` and ``column`` are the subclass's constants, never user input."""
        with self._lock:
            row = self._db.execute(f"SELECT {column}, mac FROM {table} WHERE key = ?", (key,)).fetchone()
        return row[0] if row is not None and mac_matches(row[1], key, row[0]) else None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
