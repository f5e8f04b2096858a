"""The module pool: every module the Proposer wrote, in the run's SQLite (``pool.sqlite``).

One row per proposed module: its source, the API set it was asked for, whether it passed
validation and the findings, where it came from (the round and the Proposer checkpoint),
and the Coder's record on it (samples, correct samples, best speedup), which
:meth:`ModulePool.record` keeps up to date. Valid modules are the Coder's training
problems (:meth:`ModulePool.valid_problems`) and the frontier's statistics
(:meth:`ModulePool.stats`). Every write is committed at once; the file is shared by
threads and survives a crash.

This module stores and fetches; it neither validates nor evaluates.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from kz_core.model import EvalResult, Finding, ModuleStats, Problem, content_hash
from kz_core.proposer.similarity import Fingerprint, fingerprint
from kz_core.serialization import from_json_dict, to_json_dict
from kz_core.store import SqliteStore

#: The pool's file name inside a run directory.
POOL_FILE = "pool.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS modules (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    code TEXT NOT NULL,
    hash TEXT NOT NULL,
    apis TEXT NOT NULL,
    valid INTEGER NOT NULL,
    reason TEXT NOT NULL,
    findings TEXT NOT NULL,
    runtime_ms REAL,
    io_bytes INTEGER,
    round INTEGER NOT NULL,
    checkpoint TEXT NOT NULL,
    created REAL NOT NULL,
    samples INTEGER NOT NULL DEFAULT 0,
    correct INTEGER NOT NULL DEFAULT 0,
    best_speedup REAL
);
CREATE INDEX IF NOT EXISTS modules_valid ON modules (valid, seq);
"""
_COLUMNS = "name, code, apis, valid, reason, findings, runtime_ms, io_bytes, round, checkpoint, created, samples, correct, best_speedup"


@attrs.frozen
class PoolEntry:
    """One module of the pool, as stored.

    :ivar name: its unique name (the problem name the Coder sees).
    :ivar code: its source.
    :ivar apis: the API set it was asked for.
    :ivar valid: whether it passed validation.
    :ivar reason: the first failed check (empty when valid).
    :ivar findings: validation's findings.
    :ivar runtime_ms: forward time when validated, milliseconds.
    :ivar io_bytes: bytes of its inputs and outputs.
    :ivar round: the round (of ``kz propose`` or of training) that proposed it.
    :ivar checkpoint: the Proposer model or checkpoint that wrote it.
    :ivar created: when it was added (seconds since the epoch).
    :ivar samples: Coder samples evaluated on it.
    :ivar correct: how many of those were correct.
    :ivar best_speedup: best speedup of a correct Coder sample, when measured.
    """

    name: str
    code: str
    apis: tuple[str, ...]
    valid: bool
    reason: str = ""
    findings: tuple[Finding, ...] = ()
    runtime_ms: float | None = None
    io_bytes: int | None = None
    round: int = 0
    checkpoint: str = ""
    created: float = 0.0
    samples: int = 0
    correct: int = 0
    best_speedup: float | None = None

    @property
    def stats(self) -> ModuleStats:
        return ModuleStats(self.name, self.apis, self.samples, self.correct, self.best_speedup)

    @property
    def problem(self) -> Problem:
        return Problem(name=self.name, code=self.code, source=POOL_FILE)


def _entry(row: tuple[Any, ...]) -> PoolEntry:
    name, code, apis, valid, reason, findings, runtime_ms, io_bytes, round_, checkpoint, created, samples, correct, best = row
    return PoolEntry(
        name=name,
        code=code,
        apis=tuple(json.loads(apis)),
        valid=bool(valid),
        reason=reason,
        findings=tuple(from_json_dict(Finding, f) for f in json.loads(findings)),
        runtime_ms=runtime_ms,
        io_bytes=io_bytes,
        round=round_,
        checkpoint=checkpoint,
        created=created,
        samples=samples,
        correct=correct,
        best_speedup=best,
    )


class ModulePool(SqliteStore):
    """The pool in one SQLite file; a context manager.

    :param path: the file (``<run dir>/pool.sqlite``, see :func:`open_pool`).
    """

    SCHEMA = SCHEMA

    def __init__(self, path: Path | str):
        super().__init__(Path(path))
        self._fingerprints: dict[str, Fingerprint | None] = {}
        self._fingerprinted_up_to = 0

    # -- writing ------------------------------------------------------------------------

    def add(self, module: Any, round: int = 0, checkpoint: str = "") -> str:
        """Store a validated module (a :class:`~kz_core.proposer.validate.ModuleValidation`).

        :param round: the round that proposed it.
        :param checkpoint: the Proposer model or checkpoint that wrote it.
        :returns: the name it is stored under: its own, or with ``_2``, ``_3``, ... appended
            when the name is taken.
        """
        findings = json.dumps([to_json_dict(f) for f in module.findings])
        with self._lock:
            name = module.name
            taken = {row[0] for row in self._db.execute("SELECT name FROM modules WHERE name = ? OR name LIKE ?", (name, f"{name}_%")).fetchall()}
            suffix = 2
            while name in taken:
                name = f"{module.name}_{suffix}"
                suffix += 1
            self._db.execute(
                "INSERT INTO modules (name, code, hash, apis, valid, reason, findings, runtime_ms, io_bytes, round, checkpoint, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, module.code, content_hash(module.code), json.dumps(list(module.apis)), int(module.valid), module.reason, findings,
                 module.runtime_ms, module.io_bytes, int(round), checkpoint, time.time()),
            )
        return name

    def record(self, module: str, results: Sequence[EvalResult], baseline: str = "eager") -> None:
        """Add the Coder's results on ``module`` to its statistics.

        :param results: evaluation results of Coder samples for this module.
        :param baseline: the baseline whose speedup counts for ``best_speedup``.
        :raises KeyError: no module of that name.
        """
        speedups = [r.speedups[baseline] for r in results if r.correct and baseline in r.speedups]
        best = max(speedups) if speedups else None
        with self._lock:
            cursor = self._db.execute(
                "UPDATE modules SET samples = samples + ?, correct = correct + ?, "
                "best_speedup = CASE WHEN ? IS NULL THEN best_speedup WHEN best_speedup IS NULL OR best_speedup < ? THEN ? ELSE best_speedup END "
                "WHERE name = ?",
                (len(results), sum(r.correct for r in results), best, best, best, module),
            )
        if cursor.rowcount == 0:
            raise KeyError(f"no module named {module!r} in the pool {self.path}")

    # -- reading ------------------------------------------------------------------------

    def entries(self, valid: bool | None = None) -> list[PoolEntry]:
        """Modules oldest first; ``valid``: only valid (True) or only invalid (False) ones."""
        where = "" if valid is None else f" WHERE valid = {int(valid)}"
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM modules{where} ORDER BY seq").fetchall()
        return [_entry(row) for row in rows]

    def get(self, name: str) -> PoolEntry | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM modules WHERE name = ?", (name,)).fetchone()
        return _entry(row) if row else None

    def stats(self) -> list[ModuleStats]:
        """The Coder's record on every valid module, oldest first (the frontier's input)."""
        return [entry.stats for entry in self.entries(valid=True)]

    def valid_problems(self) -> list[Problem]:
        """The valid modules as problems for the Coder, oldest first."""
        return [entry.problem for entry in self.entries(valid=True)]

    def fingerprints(self) -> list[tuple[str, Fingerprint | None]]:
        """Normalised fingerprints of the valid modules (what ``duplicate`` compares with)."""
        with self._lock:
            rows = self._db.execute("SELECT seq, name, code FROM modules WHERE valid = 1 AND seq > ? ORDER BY seq", (self._fingerprinted_up_to,)).fetchall()
        for seq, name, code in rows:
            self._fingerprints[name] = fingerprint(code)
            self._fingerprinted_up_to = max(self._fingerprinted_up_to, seq)
        return list(self._fingerprints.items())

    def reasons(self) -> Counter[str]:
        """How many invalid modules failed each check first."""
        with self._lock:
            rows = self._db.execute("SELECT reason, COUNT(*) FROM modules WHERE valid = 0 GROUP BY reason").fetchall()
        return Counter(dict(rows))

    def next_round(self) -> int:
        """One past the latest round stored (0 for an empty pool)."""
        with self._lock:
            latest = self._db.execute("SELECT MAX(round) FROM modules").fetchone()[0]
        return 0 if latest is None else latest + 1

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM modules").fetchone()[0]


def open_pool(run_dir: Path | str) -> ModulePool:
    """The pool of a run directory (created when missing)."""
    return ModulePool(Path(run_dir) / POOL_FILE)
