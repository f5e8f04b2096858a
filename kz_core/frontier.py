"""The core's frontier: which modules the Coder trains on next, which APIs the Proposer gets.

KernelZero trains on the *frontier*: modules the Coder sometimes solves, not those it always
or never solves, because a group of samples that are all right or all wrong carries no
learning signal. This module is the core's default ``select_frontier`` plugin (selector
name ``beta``) and the API-set sampler the Proposer is prompted from:

- :func:`posterior`: a module's pass rate as a Beta posterior,
  ``Beta(prior_alpha + correct, prior_beta + samples - correct)``;
  :func:`module_posteriors` and :func:`api_posteriors` build them per module and per API
  (an API's record sums the records of the modules built from it).
- :func:`frontier_score`: how valuable a pass rate ``p`` is, in [0, 1], peaking at
  ``p = 1/2``: ``variance`` is ``4 p (1 - p)``, ``linear`` is ``1 - 2 |p - 1/2|``. It is
  applied to the posterior mean, so a module never tried scores at the prior's mean (1/2
  with the default prior: the top score, which makes untried modules get explored).
- :func:`select_modules` (and the ``select_frontier`` hook, which answers for
  ``frontier.name == "beta"``): up to ``k`` modules, a ``replay_share`` of them the best
  among the older half of the pool, the rest the best overall.
- :func:`select_uniform` (``frontier.name == "uniform"``): ``k`` modules drawn uniformly,
  the ablation the frontier is measured against.
- :func:`sample_api_sets`: API sets for the Proposer, each API weighted by
  ``max(explore, frontier score of its posterior)``.

Everything here is a deterministic function of its arguments (the sampler draws only from
the ``random.Random`` it is given): no I/O, no torch, no global state, and it never
changes a record it is given.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import attrs

from kz_core.config import ConfigError, FrontierConfig
from kz_core.hookspecs import hookimpl
from kz_core.model import ApiSpec, FrontierSelection, ModuleStats

#: The selector name this plugin answers ``select_frontier`` for (``frontier.name``).
SELECTOR_NAME = "beta"
#: The frontier scores :func:`frontier_score` knows (``frontier.score``).
SCORES: tuple[str, ...] = ("variance", "linear")


# ---------------------------------------------------------------------------------------
# Beta posteriors of pass rates
# ---------------------------------------------------------------------------------------


@attrs.frozen
class BetaPosterior:
    """The posterior ``Beta(alpha, beta)`` of a pass rate.

    :ivar alpha: prior pseudo-count of correct samples plus the correct samples seen.
    :ivar beta: prior pseudo-count of incorrect samples plus the incorrect samples seen.
    """

    alpha: float
    beta: float

    @property
    def mean(self) -> float:
        """The posterior mean pass rate, ``alpha / (alpha + beta)``."""
        return self.alpha / (self.alpha + self.beta)


def posterior(samples: int, correct: int, config: FrontierConfig) -> BetaPosterior:
    """The pass-rate posterior after ``correct`` of ``samples`` samples were correct.

    :param samples: samples evaluated (>= 0).
    :param correct: how many of them were correct (0 <= correct <= samples).
    :param config: the ``frontier`` config section (``prior_alpha``, ``prior_beta`` > 0).
    :returns: ``Beta(prior_alpha + correct, prior_beta + samples - correct)``.
    :raises ValueError: for counts out of range or a prior that is not positive.
    """
    if samples < 0 or correct < 0 or correct > samples:
        raise ValueError(
            f"a pass-rate record needs 0 <= correct <= samples, got correct={correct}, samples={samples}"
        )
    if not (config.prior_alpha > 0 and config.prior_beta > 0):
        raise ConfigError(
            "frontier.prior_alpha and frontier.prior_beta must be positive, got "
            f"prior_alpha={config.prior_alpha}, prior_beta={config.prior_beta}"
        )
    return BetaPosterior(alpha=config.prior_alpha + correct, beta=config.prior_beta + samples - correct)


def merge_records(stats: Sequence[ModuleStats]) -> list[ModuleStats]:
    """One record per module name, in order of first appearance (the pool's age order).

    Records of the same module (from several rounds) are summed: samples and correct
    samples add up, the first non-empty ``apis`` is kept, and the best speedup is the
    largest one measured.

    :param stats: records, oldest module first; a name may appear more than once.
    :returns: a new list; the records given are not changed.
    """
    merged: dict[str, ModuleStats] = {}
    for record in stats:
        seen = merged.get(record.module)
        if seen is None:
            merged[record.module] = record
            continue
        speedups = [s for s in (seen.best_speedup, record.best_speedup) if s is not None]
        merged[record.module] = attrs.evolve(
            seen,
            apis=seen.apis or record.apis,
            samples=seen.samples + record.samples,
            correct=seen.correct + record.correct,
            best_speedup=max(speedups) if speedups else None,
        )
    return list(merged.values())


def module_posteriors(stats: Sequence[ModuleStats], config: FrontierConfig) -> dict[str, BetaPosterior]:
    """Each module's pass-rate posterior, by module name, in the pool's age order.

    :param stats: one record per module (repeated names are summed, see :func:`merge_records`).
    :param config: the ``frontier`` config section.
    :returns: ``{module: BetaPosterior}``.
    """
    return {record.module: posterior(record.samples, record.correct, config) for record in merge_records(stats)}


def api_posteriors(stats: Sequence[ModuleStats], config: FrontierConfig) -> dict[str, BetaPosterior]:
    """Each API's pass-rate posterior, from the modules built from it.

    An API's record is the sum of the samples and correct samples of every module whose
    ``apis`` include it (a module counts once per API, however often it lists it). APIs
    that no module names are absent: their posterior is the prior.

    :param stats: module records (repeated names are summed, see :func:`merge_records`).
    :param config: the ``frontier`` config section.
    :returns: ``{api name: BetaPosterior}``, APIs sorted by name.
    """
    totals: dict[str, tuple[int, int]] = {}
    for record in merge_records(stats):
        posterior(record.samples, record.correct, config)  # rejects impossible counts
        for api in set(record.apis):
            samples, correct = totals.get(api, (0, 0))
            totals[api] = (samples + record.samples, correct + record.correct)
    return {api: posterior(samples, correct, config) for api, (samples, correct) in sorted(totals.items())}


# ---------------------------------------------------------------------------------------
# Frontier scores
# ---------------------------------------------------------------------------------------


def frontier_score(p: float, score: str) -> float:
    """How valuable training on a pass rate ``p`` is: 1 at ``p = 1/2``, 0 at 0 and 1.

    ``variance``: the Bernoulli variance normalised to peak 1, ``4 p (1 - p)``.
    ``linear``: ``1 - 2 |p - 1/2|``. Both are symmetric around ``p = 1/2``.

    :param p: a pass rate in [0, 1] (a posterior mean).
    :param score: ``variance`` or ``linear`` (``frontier.score``).
    :returns: a score in [0, 1].
    :raises ValueError: for an unknown score name or ``p`` outside [0, 1].
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a pass rate must lie in [0, 1], got {p}")
    if score == "variance":
        value = 4.0 * p * (1.0 - p)
    elif score == "linear":
        value = 1.0 - 2.0 * abs(p - 0.5)
    else:
        raise ConfigError(f"unknown frontier score {score!r}: set frontier.score to one of {', '.join(SCORES)}")
    return min(1.0, max(0.0, value))


def module_scores(stats: Sequence[ModuleStats], config: FrontierConfig) -> dict[str, float]:
    """Each module's frontier score (of its posterior mean), in the pool's age order.

    :param stats: module records, oldest first.
    :param config: the ``frontier`` config section (``score`` and the prior).
    :returns: ``{module: score in [0, 1]}``.
    """
    return {name: frontier_score(beta.mean, config.score) for name, beta in module_posteriors(stats, config).items()}


# ---------------------------------------------------------------------------------------
# Module selection: the select_frontier hook
# ---------------------------------------------------------------------------------------


def _best(names: Sequence[str], scores: Mapping[str, float], count: int) -> list[str]:
    """The ``count`` best-scoring names, highest score first, ties broken by name."""
    return sorted(names, key=lambda name: (-scores[name], name))[: max(count, 0)]


def select_modules(stats: Sequence[ModuleStats], k: int, config: FrontierConfig) -> FrontierSelection:
    """Choose up to ``k`` modules to train on, and the API sets they were built from.

    ``round(k * replay_share)`` picks are the best-scoring modules of the older half of the
    pool (the first ``len(pool) // 2`` modules in ``stats`` order, which is oldest first),
    so that old modules keep being rehearsed; the remaining picks are the best-scoring
    modules overall not already picked. When the older half is too small, the remaining
    picks take its place. Ties are broken by name, so the result is deterministic.

    :param stats: one record per module, oldest first (repeated names are summed).
    :param k: how many modules to choose (>= 0); fewer come back when the pool is smaller.
    :param config: the ``frontier`` config section.
    :returns: a :class:`~kz_core.model.FrontierSelection`: ``modules`` best score first,
        ``scores`` of the chosen modules, and up to ``k`` distinct, sorted, non-empty API
        sets of the chosen modules, in the order of ``modules``.
    :raises ValueError: for a negative ``k``, a ``replay_share`` outside [0, 1], an unknown
        score or impossible counts.
    """
    if k < 0:
        raise ValueError(f"the frontier cannot choose a negative number of modules, got k={k}")
    if not 0.0 <= config.replay_share <= 1.0:
        raise ConfigError(f"frontier.replay_share must lie in [0, 1], got {config.replay_share}")
    records = merge_records(stats)
    scores = module_scores(records, config)
    names = [record.module for record in records]
    k = min(k, len(names))
    older = names[: len(names) // 2]
    replayed = _best(older, scores, min(round(k * config.replay_share), k))
    fresh = _best([name for name in names if name not in replayed], scores, k - len(replayed))
    chosen = _best(replayed + fresh, scores, k)
    return _selection(records, chosen, scores, k)


def _selection(records: Sequence[ModuleStats], chosen: Sequence[str], scores: Mapping[str, float], k: int) -> FrontierSelection:
    """The selection of ``chosen`` modules: their scores and up to ``k`` distinct, sorted,
    non-empty API sets, in the order of ``chosen``."""
    apis_of = {record.module: record.apis for record in records}
    api_sets: list[tuple[str, ...]] = []
    for name in chosen:
        api_set = tuple(sorted(set(apis_of[name])))
        if api_set and api_set not in api_sets:
            api_sets.append(api_set)
    return FrontierSelection(
        modules=tuple(chosen),
        api_sets=tuple(api_sets[:k]),
        scores={name: scores[name] for name in chosen},
    )


def select_uniform(stats: Sequence[ModuleStats], k: int, config: FrontierConfig) -> FrontierSelection:
    """Up to ``k`` modules drawn uniformly, whatever their pass rates: the ablation that
    :func:`select_modules` is measured against (``frontier.name == "uniform"``). The draw
    is seeded by the pool's records, so the same pool gives the same choice."""
    if k < 0:
        raise ValueError(f"the frontier cannot choose a negative number of modules, got k={k}")
    import hashlib

    records = merge_records(stats)
    scores = module_scores(records, config)
    digest = hashlib.sha256(repr([(r.module, r.samples, r.correct) for r in records]).encode()).digest()
    chosen = random.Random(int.from_bytes(digest[:8], "big")).sample([r.module for r in records], min(k, len(records)))
    return _selection(records, chosen, scores, k)


#: The selectors the core answers ``select_frontier`` for, by ``frontier.name``.
SELECTORS = {SELECTOR_NAME: select_modules, "uniform": select_uniform}


@hookimpl
def select_frontier(stats: Sequence[ModuleStats], k: int, config: FrontierConfig) -> FrontierSelection | None:
    """Answer for ``frontier.name`` ``beta`` (:func:`select_modules`) and ``uniform``
    (:func:`select_uniform`); else None (another plugin's selector)."""
    selector = SELECTORS.get(config.name)
    return selector(stats, k, config) if selector is not None else None


# ---------------------------------------------------------------------------------------
# API sets for the Proposer
# ---------------------------------------------------------------------------------------


def api_weights(catalog: Mapping[str, ApiSpec], stats: Sequence[ModuleStats], config: FrontierConfig) -> dict[str, float]:
    """The sampling weight of each catalog API: ``max(explore, frontier score)``.

    The score is that of the API's posterior mean (:func:`api_posteriors`); an API no
    module was built from scores at the prior, the top score with the default prior.

    :param catalog: the API catalog by name (:func:`kz_core.proposer.catalog.api_catalog`).
    :param stats: module records.
    :param config: the ``frontier`` config section (``explore`` >= 0).
    :returns: ``{api name: weight}`` for every catalog API, sorted by name.
    :raises ValueError: for a negative ``explore``, an unknown score or impossible counts.
    """
    if config.explore < 0:
        raise ConfigError(f"frontier.explore must not be negative, got {config.explore}")
    posteriors = api_posteriors(stats, config)
    prior = posterior(0, 0, config)
    return {
        name: max(config.explore, frontier_score(posteriors.get(name, prior).mean, config.score))
        for name in sorted(catalog)
    }


def sample_api_sets(
    catalog: dict[str, ApiSpec],
    stats: Sequence[ModuleStats],
    count: int,
    min_apis: int,
    max_apis: int,
    config: FrontierConfig,
    rng: random.Random,
) -> list[tuple[str, ...]]:
    """Draw ``count`` API sets for the Proposer, weighted towards the Coder's frontier.

    Each set's size is drawn uniformly from ``[min_apis, max_apis]`` and capped at the
    catalog's size; its APIs are drawn without replacement with the weights of
    :func:`api_weights` (uniformly among those left when their weights are all zero).
    The same ``rng`` state gives the same sets.

    :param catalog: the API catalog by name.
    :param stats: module records (the Coder's record on modules built from these APIs).
    :param count: how many sets (>= 0).
    :param min_apis: fewest APIs per set (>= 1).
    :param max_apis: most APIs per set (>= ``min_apis``).
    :param config: the ``frontier`` config section.
    :param rng: the source of randomness, seeded by the caller.
    :returns: ``count`` tuples of distinct catalog names, each sorted by name.
    :raises ValueError: for sizes out of range, or ``count > 0`` with an empty catalog.
    """
    if count < 0:
        raise ValueError(f"cannot sample a negative number of API sets, got count={count}")
    if not 1 <= min_apis <= max_apis:
        raise ConfigError(f"API set sizes need 1 <= min_apis <= max_apis, got min_apis={min_apis}, max_apis={max_apis}")
    if count and not catalog:
        raise ValueError("the API catalog is empty: no API set can be drawn (is kz_core.proposer.catalog loaded?)")
    weights = api_weights(catalog, stats, config)
    sets: list[tuple[str, ...]] = []
    for _ in range(count):
        size = min(rng.randint(min_apis, max_apis), len(weights))
        left = dict(weights)
        drawn: list[str] = []
        for _ in range(size):
            drawn.append(_draw_one(left, rng))
            del left[drawn[-1]]
        sets.append(tuple(sorted(drawn)))
    return sets


def _draw_one(weights: Mapping[str, float], rng: random.Random) -> str:
    """One name drawn with probability proportional to its weight (uniform if all are 0)."""
    names = list(weights)
    total = sum(weights.values())
    if total <= 0:
        return names[rng.randrange(len(names))]
    threshold = rng.random() * total
    running = 0.0
    for name in names:
        running += weights[name]
        if threshold < running:
            return name
    return next(name for name in reversed(names) if weights[name] > 0)  # rounding at the top end
