"""The core's frontier: Beta posteriors, scores, module selection, API-set sampling.

Properties (hypothesis) pin the contracts: scores in [0, 1] and symmetric around 1/2,
modules the Coder always or never solves never preferred over ones it solves half the
time, selections of distinct names with their replay share, sampled sets of the right
sizes. Examples pin the hook through the plugin manager and the sampler's bias towards
the frontier.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kz_core.config import load_config
from kz_core.frontier import (
    SCORES,
    BetaPosterior,
    api_posteriors,
    api_weights,
    frontier_score,
    merge_records,
    module_scores,
    posterior,
    sample_api_sets,
    select_modules,
)
from kz_core.model import ApiSpec, FrontierSelection, ModuleStats
from kz_core.plugins import get_plugin_manager


def frontier_config(*overrides: str):
    return load_config(None, list(overrides)).frontier


CONFIGS = {score: frontier_config(f"frontier.score={score}") for score in SCORES}
DEFAULT = frontier_config()

score_names = st.sampled_from(SCORES)
rates = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def pools(draw, max_size: int = 12) -> list[ModuleStats]:
    """Module records with distinct names, oldest first, built from a few APIs."""
    size = draw(st.integers(min_value=0, max_value=max_size))
    records = []
    for index in range(size):
        samples = draw(st.integers(min_value=0, max_value=16))
        correct = draw(st.integers(min_value=0, max_value=samples))
        apis = draw(st.lists(st.sampled_from(["torch.add", "torch.matmul", "torch.relu", "torch.sum"]), max_size=3))
        records.append(ModuleStats(f"m{index:02d}", apis=tuple(apis), samples=samples, correct=correct))
    return records


# ---------------------------------------------------------------------------------------
# Posteriors
# ---------------------------------------------------------------------------------------


def test_posterior_adds_counts_to_the_prior():
    config = frontier_config("frontier.prior_alpha=2", "frontier.prior_beta=3")
    assert posterior(10, 4, config) == BetaPosterior(alpha=6.0, beta=9.0)
    assert posterior(10, 4, config).mean == pytest.approx(6 / 15)
    assert posterior(0, 0, DEFAULT).mean == 0.5


@pytest.mark.parametrize(("samples", "correct"), [(3, 4), (-1, 0), (2, -1)])
def test_posterior_rejects_impossible_counts(samples, correct):
    with pytest.raises(ValueError, match="0 <= correct <= samples"):
        posterior(samples, correct, DEFAULT)


def test_posterior_rejects_a_prior_that_is_not_positive():
    with pytest.raises(ValueError, match="prior_alpha"):
        posterior(1, 1, frontier_config("frontier.prior_alpha=0"))


def test_api_posteriors_sum_the_modules_built_from_each_api():
    stats = [
        ModuleStats("a", apis=("torch.add", "torch.relu"), samples=4, correct=1),
        ModuleStats("b", apis=("torch.add", "torch.add"), samples=6, correct=6),
        ModuleStats("c", samples=8, correct=0),
    ]
    posteriors = api_posteriors(stats, DEFAULT)
    assert posteriors == {
        "torch.add": BetaPosterior(alpha=1 + 7, beta=1 + 3),
        "torch.relu": BetaPosterior(alpha=1 + 1, beta=1 + 3),
    }


def test_merge_records_sums_repeated_modules_in_age_order():
    stats = [
        ModuleStats("old", samples=2, correct=1, best_speedup=1.5),
        ModuleStats("new", apis=("torch.sum",), samples=1, correct=0),
        ModuleStats("old", apis=("torch.add",), samples=3, correct=3, best_speedup=2.0),
    ]
    merged = merge_records(stats)
    assert [record.module for record in merged] == ["old", "new"]
    assert merged[0] == ModuleStats("old", apis=("torch.add",), samples=5, correct=4, best_speedup=2.0)


# ---------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------


@given(p=rates, score=score_names)
def test_scores_lie_in_zero_one(p, score):
    assert 0.0 <= frontier_score(p, score) <= 1.0


@given(p=rates, score=score_names)
def test_scores_are_symmetric_around_one_half(p, score):
    assert frontier_score(p, score) == pytest.approx(frontier_score(1.0 - p, score), abs=1e-12)


@pytest.mark.parametrize("score", SCORES)
def test_scores_peak_at_one_half_and_vanish_at_the_ends(score):
    assert frontier_score(0.5, score) == 1.0
    assert frontier_score(0.0, score) == 0.0
    assert frontier_score(1.0, score) == 0.0
    assert frontier_score(0.25, score) == {"variance": 0.75, "linear": 0.5}[score]


def test_unknown_score_name_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown frontier score 'entropy'.*variance, linear"):
        frontier_score(0.5, "entropy")


def test_pass_rate_outside_zero_one_is_an_error():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        frontier_score(1.5, "variance")


@given(
    n=st.integers(min_value=2, max_value=200),
    extreme=st.booleans(),
    odd_half=st.booleans(),
    score=score_names,
    prior=st.floats(min_value=0.1, max_value=10.0),
)
def test_always_or_never_solved_is_never_preferred_over_half_solved(n, extreme, odd_half, score, prior):
    """Same sample count, any symmetric prior: c = 0 or n loses to c about n / 2."""
    config = frontier_config(
        f"frontier.score={score}", f"frontier.prior_alpha={prior}", f"frontier.prior_beta={prior}", "frontier.replay_share=0"
    )
    half = (n + 1) // 2 if odd_half else n // 2
    stats = [ModuleStats("edge", samples=n, correct=n if extreme else 0), ModuleStats("half", samples=n, correct=half)]
    scores = module_scores(stats, config)
    assert scores["half"] > scores["edge"]
    # Whatever the order of the pool and the names' tie-break.
    for pool in (stats, stats[::-1]):
        assert select_modules(pool, 1, config).modules == ("half",)


def test_an_untried_module_scores_at_the_prior():
    scores = module_scores([ModuleStats("new"), ModuleStats("solved", samples=8, correct=8)], DEFAULT)
    assert scores["new"] == 1.0
    assert scores["solved"] < 0.5


# ---------------------------------------------------------------------------------------
# Module selection
# ---------------------------------------------------------------------------------------


@given(stats=pools(), k=st.integers(min_value=0, max_value=15), score=score_names, share=st.sampled_from([0.0, 0.2, 0.5, 1.0]))
def test_selection_returns_at_most_k_distinct_names_from_the_input(stats, k, score, share):
    config = frontier_config(f"frontier.score={score}", f"frontier.replay_share={share}")
    selection = select_modules(stats, k, config)
    assert len(selection.modules) == min(k, len(stats))
    assert len(set(selection.modules)) == len(selection.modules)
    assert set(selection.modules) <= {s.module for s in stats}
    assert set(selection.scores) == set(selection.modules)
    assert all(0.0 <= value <= 1.0 for value in selection.scores.values())
    ordered = [(-selection.scores[m], m) for m in selection.modules]
    assert ordered == sorted(ordered), "most valuable first, ties by name"
    assert len(selection.api_sets) <= k
    assert len(set(selection.api_sets)) == len(selection.api_sets)
    assert all(api_set and list(api_set) == sorted(api_set) for api_set in selection.api_sets)


@given(stats=pools(), k=st.integers(min_value=0, max_value=15), share=st.floats(min_value=0.0, max_value=1.0))
def test_replay_share_is_respected(stats, k, share):
    config = frontier_config(f"frontier.replay_share={share}")
    selection = select_modules(stats, k, config)
    older = {s.module for s in stats[: len(stats) // 2]}
    picks = min(k, len(stats))
    wanted = min(round(picks * share), len(older))
    assert sum(name in older for name in selection.modules) >= wanted
    # The other picks are the best of what was left: nothing skipped scores higher.
    scores = module_scores(stats, config)
    newer_chosen = [m for m in selection.modules if m not in older]
    skipped = [s.module for s in stats if s.module not in selection.modules]
    if newer_chosen and skipped:
        assert min(scores[m] for m in newer_chosen) >= max(scores[m] for m in skipped)


def test_replay_takes_the_best_old_modules_even_when_new_ones_score_higher():
    old = [ModuleStats(f"old{i}", samples=10, correct=c) for i, c in enumerate([10, 7, 9, 0])]
    new = [ModuleStats(f"new{i}", samples=10, correct=5) for i in range(4)]
    config = frontier_config("frontier.replay_share=0.5")
    selection = select_modules(old + new, 4, config)
    assert set(selection.modules) == {"old1", "old2", "new0", "new1"}
    assert selection.modules[:2] == ("new0", "new1")  # best first, ties by name
    without_replay = select_modules(old + new, 4, frontier_config("frontier.replay_share=0"))
    assert without_replay.modules == ("new0", "new1", "new2", "new3")


def test_selection_collects_distinct_api_sets_of_the_chosen_modules():
    stats = [
        ModuleStats("a", apis=("torch.relu", "torch.add"), samples=4, correct=2),
        ModuleStats("b", apis=("torch.add", "torch.relu"), samples=4, correct=2),
        ModuleStats("c", samples=4, correct=2),
        ModuleStats("d", apis=("torch.sum",), samples=4, correct=2),
        ModuleStats("e", apis=("torch.matmul",), samples=4, correct=4),
    ]
    selection = select_modules(stats, 4, frontier_config("frontier.replay_share=0"))
    assert selection.modules == ("a", "b", "c", "d")
    assert selection.api_sets == (("torch.add", "torch.relu"), ("torch.sum",))


def test_selection_rejects_bad_arguments():
    with pytest.raises(ValueError, match="negative"):
        select_modules([], -1, DEFAULT)
    with pytest.raises(ValueError, match="replay_share"):
        select_modules([], 1, frontier_config("frontier.replay_share=1.5"))


def test_select_frontier_through_the_plugin_manager():
    stats = [
        ModuleStats("always", apis=("torch.add",), samples=8, correct=8),
        ModuleStats("never", apis=("torch.matmul",), samples=8, correct=0),
        ModuleStats("half", apis=("torch.relu", "torch.sum"), samples=8, correct=4),
        ModuleStats("untried", apis=("torch.relu",)),
    ]
    hook = get_plugin_manager().hook.select_frontier
    for score in SCORES:
        selection = hook(stats=stats, k=2, config=CONFIGS[score])
        assert isinstance(selection, FrontierSelection)
        assert selection.modules == ("half", "untried")
        assert selection.scores == {"half": 1.0, "untried": 1.0}
        assert selection.api_sets == (("torch.relu", "torch.sum"), ("torch.relu",))


def test_select_frontier_answers_only_for_beta():
    from kz_core import frontier

    stats = [ModuleStats("half", samples=4, correct=2)]
    other = frontier_config("frontier.name=someone_else")
    assert frontier.select_frontier(stats=stats, k=1, config=other) is None
    assert get_plugin_manager().hook.select_frontier(stats=stats, k=1, config=other) is None


# ---------------------------------------------------------------------------------------
# API sets for the Proposer
# ---------------------------------------------------------------------------------------


def catalog_of(*names: str) -> dict[str, ApiSpec]:
    return {name: ApiSpec(name=name, category="elementwise") for name in names}


CATALOG = catalog_of(*(f"torch.api{i}" for i in range(8)))


@given(
    stats=pools(),
    count=st.integers(min_value=0, max_value=20),
    sizes=st.tuples(st.integers(min_value=1, max_value=10), st.integers(min_value=0, max_value=5)),
    catalog_size=st.integers(min_value=1, max_value=8),
    seed=st.integers(min_value=0, max_value=2**32),
    score=score_names,
)
def test_sampled_sets_have_the_right_sizes_and_distinct_catalog_names(stats, count, sizes, catalog_size, seed, score):
    min_apis, extra = sizes
    max_apis = min_apis + extra
    catalog = catalog_of(*["torch.add", "torch.matmul", "torch.relu", "torch.sum", "torch.exp", "torch.tanh", "torch.cumsum", "torch.max"][:catalog_size])
    sets = sample_api_sets(catalog, stats, count, min_apis, max_apis, CONFIGS[score], random.Random(seed))
    assert len(sets) == count
    for api_set in sets:
        assert min(min_apis, len(catalog)) <= len(api_set) <= min(max_apis, len(catalog))
        assert len(set(api_set)) == len(api_set)
        assert set(api_set) <= set(catalog)
        assert list(api_set) == sorted(api_set)


@given(stats=pools(), seed=st.integers(min_value=0, max_value=2**32))
def test_sampling_is_deterministic_for_a_seeded_rng(stats, seed):
    catalog = catalog_of("torch.add", "torch.matmul", "torch.relu", "torch.sum", "torch.exp")
    first = sample_api_sets(catalog, stats, 10, 1, 5, DEFAULT, random.Random(seed))
    again = sample_api_sets(catalog, stats, 10, 1, 5, DEFAULT, random.Random(seed))
    assert first == again


def test_a_frontier_api_is_drawn_more_often_than_an_always_solved_one():
    stats = [
        ModuleStats("frontier_module", apis=("torch.api0",), samples=20, correct=10),
        ModuleStats("solved_module", apis=("torch.api1",), samples=20, correct=20),
    ]
    weights = api_weights(CATALOG, stats, DEFAULT)
    assert weights["torch.api0"] == 1.0
    assert DEFAULT.explore <= weights["torch.api1"] < 0.2
    sets = sample_api_sets(CATALOG, stats, 2000, 1, 2, DEFAULT, random.Random(1234))
    drawn = Counter(api for api_set in sets for api in api_set)
    assert drawn["torch.api0"] > 3 * drawn["torch.api1"], drawn


def test_the_explore_floor_keeps_solved_apis_in_the_draw():
    stats = [ModuleStats(f"m{i}", apis=(name,), samples=50, correct=50) for i, name in enumerate(CATALOG)]
    config = frontier_config("frontier.explore=0.5")
    assert set(api_weights(CATALOG, stats, config).values()) == {0.5}
    drawn = Counter(api for s in sample_api_sets(CATALOG, stats, 400, 1, 1, config, random.Random(0)) for api in s)
    assert set(drawn) == set(CATALOG)


def test_zero_weights_fall_back_to_uniform_draws():
    catalog = catalog_of("torch.add", "torch.relu")
    # So many correct samples that the posterior mean rounds to exactly 1.0: score 0.
    stats = [ModuleStats(name, apis=(name,), samples=10**17, correct=10**17) for name in catalog]
    config = frontier_config("frontier.explore=0")
    assert set(api_weights(catalog, stats, config).values()) == {0.0}
    drawn = Counter(api for s in sample_api_sets(catalog, stats, 400, 1, 1, config, random.Random(0)) for api in s)
    assert set(drawn) == set(catalog) and min(drawn.values()) > 150, drawn


def test_sampler_rejects_bad_arguments():
    rng = random.Random(0)
    with pytest.raises(ValueError, match="min_apis"):
        sample_api_sets(CATALOG, [], 1, 3, 2, DEFAULT, rng)
    with pytest.raises(ValueError, match="min_apis"):
        sample_api_sets(CATALOG, [], 1, 0, 2, DEFAULT, rng)
    with pytest.raises(ValueError, match="empty"):
        sample_api_sets({}, [], 1, 1, 2, DEFAULT, rng)
    with pytest.raises(ValueError, match="explore"):
        sample_api_sets(CATALOG, [], 1, 1, 2, frontier_config("frontier.explore=-1"), rng)
    assert sample_api_sets({}, [], 0, 1, 2, DEFAULT, rng) == []


def test_sampler_draws_from_the_shipped_catalog():
    from kz_core.proposer.catalog import api_catalog

    catalog = api_catalog()
    sets = sample_api_sets(catalog, [], 5, 1, 5, DEFAULT, random.Random(7))
    assert all(1 <= len(s) <= 5 and set(s) <= set(catalog) for s in sets)


def test_uniform_selection_ignores_pass_rates_and_is_reproducible():
    """``frontier.name=uniform``, the ablation: modules drawn whatever their scores, the
    same pool giving the same draw."""
    stats = [ModuleStats(module=f"m{i}", apis=(f"torch.api{i}",), samples=8, correct=0 if i % 2 else 8) for i in range(20)]
    uniform = frontier_config("frontier.name=uniform")
    hook = get_plugin_manager().hook.select_frontier
    first = hook(stats=stats, k=6, config=uniform)
    assert first == hook(stats=stats, k=6, config=uniform) and len(set(first.modules)) == 6
    assert all(score == pytest.approx(0.36) for score in first.scores.values())  # 0 or 8 of 8 correct: one low score
    beta = hook(stats=stats + [ModuleStats(module="edge", apis=("torch.edge",), samples=8, correct=4)], k=1, config=frontier_config())
    assert beta.modules == ("edge",)  # the frontier picks the module at p = 1/2; uniform does not look
    pools = [stats + [ModuleStats(module=f"new{n}", samples=n)] for n in range(40)]  # forty rounds' pools
    draws = Counter(m for pool in pools for m in hook(stats=pool, k=3, config=uniform).modules)
    assert len(draws) > 15  # not the same few modules every round
