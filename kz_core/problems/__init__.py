"""Problem sets: load problems from any registered source, report malformed ones, filter.

``load_problems("path/or/spec", level=1)`` returns a :class:`ProblemSet` holding the
problems that loaded and a :class:`~kz_core.model.ProblemError` for each that did not;
one bad entry never stops the rest from loading.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

import attrs

from kz_core.config import ConfigError
from kz_core.model import Problem, ProblemError
from kz_core.problems.base import ProblemSource, ProblemSourceError, make_problem, validate_problem_code

__all__ = [
    "ProblemSet",
    "ProblemSource",
    "ProblemSourceError",
    "load_problems",
    "make_problem",
    "parse_ids",
    "select_problems",
    "validate_problem_code",
]


@attrs.frozen
class ProblemSet:
    """Problems loaded from one source, and the entries that failed to load.

    :ivar source: the ``problems.source`` string.
    :ivar problems: the loaded problems that passed the filters, in source order.
    :ivar errors: one entry per malformed problem (filters apply to them where they can).
    """

    source: str
    problems: tuple[Problem, ...] = ()
    errors: tuple[ProblemError, ...] = ()

    def get(self, name: str) -> Problem | None:
        return next((p for p in self.problems if p.name == name), None)

    def names(self) -> list[str]:
        return [p.name for p in self.problems]


def parse_ids(text: str) -> set[int] | None:
    """Parse ``"1-10,15"`` into a set of ids; empty text means no filter (None)."""
    text = text.strip()
    if not text:
        return None
    ids: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                start, end = (int(x) for x in part.split("-", 1))
                if end < start:
                    raise ValueError
                ids.update(range(start, end + 1))
            else:
                ids.add(int(part))
        except ValueError:
            raise ConfigError(f"bad problem id list {text!r}: use numbers and ranges like 1-10,15") from None
    return ids


def _name_matches(name: str, pattern: str) -> bool:
    if not pattern:
        return True
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(name.lower(), pattern.lower())
    return pattern.lower() in name.lower()


def select_problems(
    problems: Iterable[Problem], *, level: int | None = None, ids: str = "", name: str = ""
) -> list[Problem]:
    """Keep problems of ``level``, with an id in ``ids`` and a name matching ``name``."""
    wanted_ids = parse_ids(ids)
    return [
        p
        for p in problems
        if (level is None or p.level == level)
        and (wanted_ids is None or p.problem_id in wanted_ids)
        and _name_matches(p.name, name)
    ]


def find_source(spec: str) -> ProblemSource:
    """The first registered problem source that accepts ``spec``."""
    from kz_core.plugins import problem_sources

    sources = problem_sources()
    for source in sources.values():
        if source.accepts(spec):
            return source
    raise ProblemSourceError(
        f"no problem source understands {spec!r}: give a folder of .py files, a .py or .jsonl "
        f"file that exists, hf:DATASET_ID, or 'examples' (installed sources: {', '.join(sources)})"
    )


def load_problems(source: str, *, level: int | None = None, ids: str = "", name: str = "") -> ProblemSet:
    """Load every problem from ``source`` through the registered sources, then filter.

    :raises ProblemSourceError: when the source as a whole is unusable.
    """
    loaded: list[Problem] = []
    errors: list[ProblemError] = []
    for item in find_source(source).load(source):
        (loaded if isinstance(item, Problem) else errors).append(item)
    kept = select_problems(loaded, level=level, ids=ids, name=name)
    # Errors have no level; keep those whose name still matches the name filter.
    errors = [e for e in errors if _name_matches(e.name, name) or e.name.startswith("line ")]
    return ProblemSet(source=source, problems=tuple(kept), errors=tuple(errors))


def load_problems_from_config(config) -> ProblemSet:
    """``load_problems`` with the ``problems`` section of a resolved config."""
    return load_problems(config.source, level=config.level, ids=config.ids, name=config.name)
