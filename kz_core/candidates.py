"""Reading candidates: a JSONL file (one candidate per line), one ``<problem>.py`` file, or
a folder of ``.py`` files.

JSONL lines hold ``problem`` (a problem's name), ``code``, and optionally ``backend``
(else the default backend) and ``sample_id`` (else the candidate's index among those for
its problem). A folder holds ``<problem>.py`` files, or ``<problem>/<sample>.py`` files
for several samples per problem. Malformed entries are reported with their location and
reason, and the rest load. Nothing here runs a candidate.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import attrs

from kz_core.errors import KzError
from kz_core.model import Candidate


class CandidateSourceError(KzError):
    """The candidates file or folder as a whole is unusable; the message says what to do."""


@attrs.frozen
class CandidateError:
    """An entry that could not be read as a candidate."""

    where: str
    reason: str


def load_candidates(path: str | Path, default_backend: str) -> tuple[list[Candidate], list[CandidateError]]:
    """Candidates from ``path`` (JSONL file or folder), and the entries that were malformed."""
    path = Path(path)
    if path.is_dir():
        return _from_folder(path, default_backend), []
    if not path.is_file():
        raise CandidateSourceError(f"candidates {path} do not exist: give a .jsonl file, a <problem>.py file or a folder of them")
    if path.suffix == ".py":  # one candidate module, for the problem its file is named after
        return [Candidate(problem=path.stem, backend=default_backend, code=path.read_text(encoding="utf-8"), sample_id="0")], []
    candidates, errors = _from_jsonl(path, default_backend)
    if not candidates:
        why = f"{len(errors)} malformed line{'s' if len(errors) != 1 else ''}, e.g. {errors[0].where}: {errors[0].reason}" if errors else "the file is empty"
        raise CandidateSourceError(
            f"no candidates in {path} ({why}): give JSON lines with 'problem' and 'code', a <problem>.py file or a folder of them"
        )
    return candidates, errors


def _from_folder(folder: Path, default_backend: str) -> list[Candidate]:
    candidates = []
    for file in sorted(folder.glob("*.py")):
        candidates.append(Candidate(problem=file.stem, backend=default_backend, code=file.read_text(encoding="utf-8"), sample_id="0"))
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
        for file in sorted(sub.glob("*.py")):
            candidates.append(Candidate(problem=sub.name, backend=default_backend, code=file.read_text(encoding="utf-8"), sample_id=file.stem))
    if not candidates:
        raise CandidateSourceError(f"no .py candidates in {folder}: use <problem>.py or <problem>/<sample>.py files")
    return candidates


def _from_jsonl(path: Path, default_backend: str) -> tuple[list[Candidate], list[CandidateError]]:
    candidates: list[Candidate] = []
    errors: list[CandidateError] = []
    per_problem: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    with path.open(encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                errors.append(CandidateError(where, f"not valid JSON: {exc.msg} (column {exc.colno})"))
                continue
            if not isinstance(row, dict):
                errors.append(CandidateError(where, "not a JSON object"))
                continue
            problem, code = row.get("problem"), row.get("code")
            backend = row.get("backend") or default_backend
            if not isinstance(problem, str) or not problem:
                errors.append(CandidateError(where, "missing or empty string field 'problem'"))
                continue
            if not isinstance(code, str):
                errors.append(CandidateError(where, "missing string field 'code'"))
                continue
            if not isinstance(backend, str):
                errors.append(CandidateError(where, "field 'backend' must be a string"))
                continue
            sample_id = row.get("sample_id")
            sample_id = str(per_problem[problem]) if sample_id is None else str(sample_id)
            per_problem[problem] += 1
            if (problem, sample_id) in seen:
                errors.append(CandidateError(where, f"duplicate sample_id {sample_id!r} for problem {problem!r}"))
                continue
            seen.add((problem, sample_id))
            candidates.append(Candidate(problem=problem, backend=backend, code=code, sample_id=sample_id))
    return candidates, errors
