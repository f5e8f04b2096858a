"""The core's own problem sources, registered like any plugin's.

- ``directory``: a folder of KernelBench-format ``.py`` files (searched recursively; a
  parent folder named ``level1``/``level_1`` gives the level, a ``12_`` prefix the id), or
  one such file;
- ``jsonl``: a JSON Lines file with ``name``, ``code`` and optional ``level``,
  ``problem_id`` (the format of KernelBench's ``problems.jsonl``);
- ``hf``: ``hf:ID`` loads a Hugging Face dataset with ``datasets`` (for example
  ``hf:ScalingIntelligence/KernelBench``, splits ``level_1``..``level_4``), or a local
  dataset folder (``hf:./folder``);
- ``examples``: the small problems shipped with kz (``examples/problems/``).

Loading reads text only; nothing here executes a problem.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from collections.abc import Iterator
from pathlib import Path

from kz_core.hookspecs import hookimpl
from kz_core.model import Problem, ProblemError
from kz_core.problems.base import ProblemSource, ProblemSourceError, make_problem

_LEVEL_DIR = re.compile(r"^level_?(\d+)$", re.IGNORECASE)
_ID_PREFIX = re.compile(r"^(\d+)_")


def _level_from_path(path: Path, root: Path) -> int | None:
    for part in reversed(path.relative_to(root).parts[:-1]):
        match = _LEVEL_DIR.match(part)
        if match:
            return int(match.group(1))
    return None


def _id_from_name(name: str) -> int | None:
    match = _ID_PREFIX.match(name)
    return int(match.group(1)) if match else None


def _load_python_files(root: Path, label: str) -> Iterator[Problem | ProblemError]:
    if root.is_file():
        files = [root]
        base = root.parent
    else:
        base = root
        files = sorted(
            p
            for p in root.rglob("*.py")
            if p.name != "__init__.py" and not any(part.startswith((".", "__")) for part in p.relative_to(root).parts[:-1])
        )
    seen: dict[str, Path] = {}
    for path in files:
        name = path.stem
        where = str(path)
        if name in seen:
            yield ProblemError(name=name, reason=f"duplicate problem name (also {seen[name]})", source=where)
            continue
        seen[name] = path
        try:
            code = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            yield ProblemError(name=name, reason=f"cannot read: {exc}", source=where)
            continue
        yield make_problem(name, code, level=_level_from_path(path, base), problem_id=_id_from_name(name), source=label or where)


class DirectorySource(ProblemSource):
    name = "directory"
    description = "a folder of KernelBench-format .py files (recursive), or one .py file"

    def accepts(self, spec: str) -> bool:
        path = Path(spec)
        return path.is_dir() or (path.suffix == ".py" and path.is_file())

    def load(self, spec: str) -> Iterator[Problem | ProblemError]:
        return _load_python_files(Path(spec), "")


def _optional_int(row: dict, key: str) -> int | None:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"field {key!r} must be an integer, got {value!r}")
    return value


class JsonlSource(ProblemSource):
    name = "jsonl"
    description = "a .jsonl file, one {name, code, level?, problem_id?} object per line"

    def accepts(self, spec: str) -> bool:
        return spec.endswith(".jsonl")

    def load(self, spec: str) -> Iterator[Problem | ProblemError]:
        path = Path(spec)
        if not path.is_file():
            raise ProblemSourceError(f"problem file {spec} does not exist")
        seen: dict[str, int] = {}
        with path.open(encoding="utf-8") as lines:
            for lineno, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                where = f"{spec}:{lineno}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield ProblemError(name=f"line {lineno}", reason=f"not valid JSON: {exc.msg} (column {exc.colno})", source=where)
                    continue
                if not isinstance(row, dict):
                    yield ProblemError(name=f"line {lineno}", reason="not a JSON object", source=where)
                    continue
                name, code = row.get("name"), row.get("code")
                if not isinstance(name, str) or not name:
                    yield ProblemError(name=f"line {lineno}", reason="missing or empty string field 'name'", source=where)
                    continue
                if not isinstance(code, str):
                    yield ProblemError(name=name, reason="missing string field 'code'", source=where)
                    continue
                try:
                    level, problem_id = _optional_int(row, "level"), _optional_int(row, "problem_id")
                except ValueError as exc:
                    yield ProblemError(name=name, reason=str(exc), source=where)
                    continue
                if name in seen:
                    yield ProblemError(name=name, reason=f"duplicate problem name (also line {seen[name]})", source=where)
                    continue
                seen[name] = lineno
                yield make_problem(name, code, level=level, problem_id=problem_id, source=where)


class HuggingFaceSource(ProblemSource):
    name = "hf"
    description = "hf:ID, a Hugging Face dataset with name/code/level/problem_id columns, e.g. hf:ScalingIntelligence/KernelBench"

    PREFIX = "hf:"

    def accepts(self, spec: str) -> bool:
        return spec.startswith(self.PREFIX)

    def load(self, spec: str) -> Iterator[Problem | ProblemError]:
        dataset_id = spec[len(self.PREFIX) :]
        try:
            import datasets
        except ImportError as exc:
            raise ProblemSourceError(
                "loading Hugging Face datasets needs the `datasets` package: pip install 'kz-core[hf]'"
            ) from exc
        try:
            local = Path(dataset_id)
            if local.is_dir() and ((local / "dataset_dict.json").exists() or (local / "state.json").exists()):
                loaded = datasets.load_from_disk(str(local))
            else:
                loaded = datasets.load_dataset(dataset_id)
        except Exception as exc:  # noqa: BLE001 - datasets raises many types; all mean "unusable"
            raise ProblemSourceError(
                f"cannot load Hugging Face dataset {dataset_id!r}: {type(exc).__name__}: {exc}. "
                "Without a network, point problems.source at a local copy (a .jsonl file or a folder)."
            ) from exc
        splits = loaded.items() if isinstance(loaded, datasets.DatasetDict) else [("", loaded)]
        seen: set[str] = set()
        for split, table in splits:
            missing = {"name", "code"} - set(table.column_names)
            if missing:
                raise ProblemSourceError(
                    f"dataset {dataset_id!r} split {split!r} lacks the column(s) {sorted(missing)}; "
                    "kz needs name and code (and reads level and problem_id when present)"
                )
            split_level = _LEVEL_DIR.match(split)
            for index, row in enumerate(table):
                where = f"{spec}[{split}][{index}]" if split else f"{spec}[{index}]"
                name = row.get("name")
                if not isinstance(name, str) or not name:
                    yield ProblemError(name=where, reason="missing or empty 'name'", source=where)
                    continue
                if name in seen:
                    # KernelBench ids restart per level; names carry the id, so a clash is real.
                    yield ProblemError(name=name, reason="duplicate problem name", source=where)
                    continue
                seen.add(name)
                level = row.get("level")
                if level is None and split_level:
                    level = int(split_level.group(1))
                yield make_problem(
                    name, row.get("code") or "", level=level, problem_id=row.get("problem_id"), source=where
                )


class ExamplesSource(ProblemSource):
    name = "examples"
    description = "examples: the small problems shipped with kz"

    KEYWORD = "examples"

    def accepts(self, spec: str) -> bool:
        return spec == self.KEYWORD

    def load(self, spec: str) -> Iterator[Problem | ProblemError]:
        folder = importlib.resources.files("kz_core.examples") / "problems"
        with importlib.resources.as_file(folder) as path:
            yield from _load_python_files(Path(path), "examples")


def example_problems_dir() -> Path:
    """The folder of the example problems shipped with kz."""
    return Path(str(importlib.resources.files("kz_core.examples") / "problems"))


@hookimpl
def register_problem_sources(register):
    # Order matters only for overlapping specs: the keyword first, then files and folders.
    register(ExamplesSource())
    register(HuggingFaceSource())
    register(JsonlSource())
    register(DirectorySource())
