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
from typing import Any

from kz_core.model import EvalResult, RuntimeStats
from kz_core.serialization import dumps, from_json_dict, loads, to_json_dict
from kz_core.store import SqliteStore, mac_matches, row_mac


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
        created REAL NOT NULL,
        mac TEXT
    );
    CREATE INDEX IF NOT EXISTS results_problem ON results (problem);
    """

    def _migrate(self) -> None:
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(results)")}
        if "mac" not in columns:  # a journal of an older kz: its rows are not signed, so not used
            self._db.execute("ALTER TABLE results ADD COLUMN mac TEXT")

    def get(self, key: str) -> EvalResult | None:
        """The result stored under ``key``; a row whose signature does not match (it was
        written by something other than kz) counts as absent."""
        text = self._signed_text("results", "result", key)
        return None if text is None else loads(EvalResult, text)

    def put(self, key: str, result: EvalResult) -> None:
        text = dumps(result)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO results (key, problem, sample_id, backend, verdict, result, created, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, result.problem, result.sample_id, result.backend, result.verdict.value, text, time.time(), row_mac(key, text)),
            )

    def results(self) -> list[EvalResult]:
        """Every correctly signed result, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT key, result, mac FROM results ORDER BY created").fetchall()
        return [loads(EvalResult, text) for key, text, mac in rows if mac_matches(mac, key, text)]

    def __len__(self) -> int:
        return len(self.results())


class BaselineCache(SqliteStore):
    """Timed baselines (eager, compile) per problem, device and torch version."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS baselines (
        key TEXT PRIMARY KEY,
        stats TEXT NOT NULL,
        created REAL NOT NULL,
        mac TEXT
    );
    """

    def _migrate(self) -> None:
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(baselines)")}
        if "mac" not in columns:
            self._db.execute("ALTER TABLE baselines ADD COLUMN mac TEXT")

    def get(self, key: str) -> RuntimeStats | None:
        """The baseline stored under ``key``; unsigned or forged rows count as absent."""
        text = self._signed_text("baselines", "stats", key)
        return None if text is None else from_json_dict(RuntimeStats, json.loads(text))

    def put(self, key: str, stats: RuntimeStats) -> None:
        text = json.dumps(to_json_dict(stats))
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO baselines (key, stats, created, mac) VALUES (?, ?, ?, ?)",
                (key, text, time.time(), row_mac(key, text)),
            )


class FuzzJournal(SqliteStore):
    """Finished ``kz fuzz`` reports of one run (a table of its ``journal.sqlite``), keyed
    like results: a re-run of the same command reuses them."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS fuzz_reports (
        key TEXT PRIMARY KEY,
        problem TEXT NOT NULL,
        sample_id TEXT NOT NULL,
        report TEXT NOT NULL,
        created REAL NOT NULL,
        mac TEXT
    );
    """

    def get(self, key: str) -> Any:
        """The :class:`kz_core.evaluate.fuzzing.FuzzReport` stored under ``key``, if signed."""
        from kz_core.evaluate.fuzzing import FuzzReport

        text = self._signed_text("fuzz_reports", "report", key)
        return None if text is None else loads(FuzzReport, text)

    def put(self, key: str, report: Any) -> None:
        text = dumps(report)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO fuzz_reports (key, problem, sample_id, report, created, mac) VALUES (?, ?, ?, ?, ?, ?)",
                (key, report.problem, report.sample_id, text, time.time(), row_mac(key, text)),
            )
