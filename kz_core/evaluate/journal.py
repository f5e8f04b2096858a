"""The journal: every evaluation result in SQLite, keyed by what determines it.

A key is a hash of the problem's and the candidate's content hashes, the backend, the
device, the torch version and the evaluator settings that affect verdicts. A re-run finds
finished results by key and skips them; each result is committed as soon as it exists,
so an interrupted run loses nothing it finished. The same file format keeps timed
baselines (per problem, device and torch version) across runs.

This module stores and fetches; it never evaluates.
"""

from __future__ import annotations

import hashlib
import json
import time

from kz_core.model import EvalResult, RuntimeStats
from kz_core.serialization import dumps, from_json_dict, loads, to_json_dict
from kz_core.store import SqliteStore


def result_key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


class Journal(SqliteStore):
    """Evaluation results of one run (``journal.sqlite`` in the run directory)."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS results (
        key TEXT PRIMARY KEY,
        problem TEXT NOT NULL,
        sample_id TEXT NOT NULL,
        backend TEXT NOT NULL,
        verdict TEXT NOT NULL,
        result TEXT NOT NULL,
        created REAL NOT NULL
    );
    CREATE INDEX IF NOT EXISTS results_problem ON results (problem);
    """

    def get(self, key: str) -> EvalResult | None:
        with self._lock:
            row = self._db.execute("SELECT result FROM results WHERE key = ?", (key,)).fetchone()
        return loads(EvalResult, row[0]) if row else None

    def put(self, key: str, result: EvalResult) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO results (key, problem, sample_id, backend, verdict, result, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, result.problem, result.sample_id, result.backend, result.verdict.value, dumps(result), time.time()),
            )

    def results(self) -> list[EvalResult]:
        with self._lock:
            rows = self._db.execute("SELECT result FROM results ORDER BY created").fetchall()
        return [loads(EvalResult, row[0]) for row in rows]

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]


class BaselineCache(SqliteStore):
    """Timed baselines (eager, compile) per problem, device and torch version."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS baselines (
        key TEXT PRIMARY KEY,
        stats TEXT NOT NULL,
        created REAL NOT NULL
    );
    """

    def get(self, key: str) -> RuntimeStats | None:
        with self._lock:
            row = self._db.execute("SELECT stats FROM baselines WHERE key = ?", (key,)).fetchone()
        return from_json_dict(RuntimeStats, json.loads(row[0])) if row else None

    def put(self, key: str, stats: RuntimeStats) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO baselines (key, stats, created) VALUES (?, ?, ?)",
                (key, json.dumps(to_json_dict(stats)), time.time()),
            )
