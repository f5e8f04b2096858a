"""Property tests of CA-GRPO's ranking contract, over settings the validator accepts.

For every variant and every group: a correct sample never ranks below a failed one; below
the gate speed changes nothing; above it a faster correct sample never ranks below a slower
one; format errors and hacks get the group's minimum; every value is finite.
"""

from __future__ import annotations

import math

import attrs
import hypothesis
from hypothesis import assume, event, given, target
from hypothesis import strategies as st

from kz_core.config import section_type
from kz_core.model import EvalResult, Verdict
from kz_reward_cagrpo.settings import CagrpoSettings, RewardConfigError, Variant, settings_from_config
from kz_reward_cagrpo.shaping import CorrectnessAverage, correct_rate, shape_group

HACKS = (Verdict.FORMAT_ERROR, Verdict.REJECTED)

#: Speedups as an evaluator could report them, odd values included.
speedup_values = st.one_of(
    st.floats(min_value=1e-6, max_value=1e6),
    st.sampled_from([0.0, -1.0, float("nan"), float("inf"), 5e-324, 1e308]),
)
#: Every verdict, with ``correct`` about half the time so that gates open often.
verdicts = st.one_of(st.just(Verdict.CORRECT), st.sampled_from(Verdict))
speedup_maps = st.dictionaries(st.sampled_from(["eager", "compile"]), speedup_values, max_size=2)

#: The reward section as load_config builds it: the core's keys and this plugin's.
RewardConfig = section_type("reward")


@st.composite
def eval_results(draw: st.DrawFn, verdict: st.SearchStrategy[Verdict] = verdicts) -> EvalResult:
    return EvalResult(
        problem="p",
        sample_id=str(draw(st.integers(0, 999))),
        backend="triton",
        verdict=draw(verdict),
        speedups=draw(speedup_maps),
    )


groups = st.lists(eval_results(), min_size=1, max_size=16)


#: Every variant of the reward.
variants = st.sampled_from(Variant)


@st.composite
def valid_settings(draw: st.DrawFn, variant: st.SearchStrategy[Variant] = variants) -> CagrpoSettings:
    """Settings built to satisfy every constraint, then passed through the validator."""
    chosen = draw(variant)
    tau = draw(st.floats(min_value=0.0, max_value=1.0))
    speed_weight = draw(st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
    speed_clip = draw(st.floats(min_value=1e-3, max_value=8.0))
    bound = 1.0 - speed_weight * speed_clip
    if chosen is Variant.DECOUPLED:
        bound = min(bound - 1e-9, 1.0 - 2.0 * speed_weight * speed_clip)
    gap = draw(st.floats(min_value=1e-9, max_value=4.0))
    incorrect = bound - gap
    compile_error = incorrect - draw(st.floats(min_value=0.0, max_value=4.0))
    runtime_error = incorrect - draw(st.floats(min_value=0.0, max_value=4.0))
    hack = min(compile_error, runtime_error) - draw(st.floats(min_value=0.0, max_value=4.0))
    config = RewardConfig(
        tau=tau,
        speed_weight=speed_weight,
        speed_clip=speed_clip,
        speed_baseline=draw(st.sampled_from(["eager", "compile"])),
        incorrect_reward=incorrect,
        compile_error_reward=compile_error,
        runtime_error_reward=runtime_error,
        hack_reward=hack,
        options={"variant": chosen.value, "global_momentum": draw(st.floats(min_value=0.0, max_value=0.999))},
    )
    return settings_from_config(config)


#: Running averages as the ``global`` variant could hold them after a few groups.
histories = st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 0.999)), max_size=5).map(
    lambda steps: _fold(CorrectnessAverage(), steps)
)


def _fold(average: CorrectnessAverage, steps: list[tuple[float, float]]) -> CorrectnessAverage:
    for rate, momentum in steps:
        average = average.updated(rate, momentum)
    return average


def _check_ranking(group: list[EvalResult], rewards: tuple[float, ...], variant: Variant) -> None:
    correct = [r for result, r in zip(group, rewards, strict=True) if result.correct]
    failed = [r for result, r in zip(group, rewards, strict=True) if not result.correct]
    if correct and failed:
        if variant is Variant.DECOUPLED:
            # Strict in exact arithmetic; centring may round a tie when the margin is tiny.
            assert min(correct) >= max(failed)
        else:
            assert min(correct) > max(failed)


@given(groups, valid_settings(), histories)
def test_a_failed_sample_never_outranks_a_correct_one(
    group: list[EvalResult], settings: CagrpoSettings, history: CorrectnessAverage
) -> None:
    _check_ranking(group, shape_group(group, settings, history).rewards, settings.variant)


def _worst_case(fast_samples: int) -> list[EvalResult]:
    """One very slow correct sample, fast correct ones, and one sample of each failure."""
    slow = EvalResult(
        problem="p", sample_id="slow", backend="triton", verdict=Verdict.CORRECT, speedups={"eager": 1e-6}
    )
    fast = EvalResult(problem="p", sample_id="fast", backend="triton", verdict=Verdict.CORRECT, speedups={"eager": 1e6})
    failures = [
        EvalResult(problem="p", sample_id=v.value, backend="triton", verdict=v) for v in Verdict if v.is_failure
    ]
    return [slow, *[fast] * fast_samples, *failures]


@hypothesis.settings(max_examples=300)
@given(
    groups,
    st.integers(0, 8),
    st.floats(0.0, 1.0, exclude_min=True),
    st.floats(0.0, 0.99),
    st.floats(0.001, 8.0),
    st.lists(st.floats(-3.0, 1.0), min_size=4, max_size=4),
    st.booleans(),
)
def test_every_accepted_config_keeps_the_ranking(
    group: list[EvalResult],
    fast_samples: int,
    tau: float,
    speed_weight: float,
    speed_clip: float,
    values: list[float],
    ordered: bool,
) -> None:
    """The validator's checks suffice: whatever it accepts ranks correctly, hacks lowest.

    Each group holds a worst case (a correct sample slower than any clip allows, next to
    fast ones and to every kind of failure), so an accepted config that breaks the ranking
    would show. Every variant is tried on every example.
    """
    if ordered:  # half the time, failure rewards in a consistent order, to reach the bounds
        values = sorted(values)
    hack, compile_error, runtime_error, incorrect = values
    group = group + _worst_case(fast_samples)
    for variant in Variant:
        config = RewardConfig(
            tau=tau,
            speed_weight=speed_weight,
            speed_clip=speed_clip,
            incorrect_reward=incorrect,
            compile_error_reward=compile_error,
            runtime_error_reward=runtime_error,
            hack_reward=hack,
            options={"variant": variant.value},
        )
        try:
            settings = settings_from_config(config)
        except RewardConfigError as error:
            event(f"{variant.value}: rejected")
            assert "reward." in str(error)
            continue
        event(f"{variant.value}: accepted")
        rewards = shape_group(group, settings).rewards
        correct = [r for result, r in zip(group, rewards, strict=True) if result.correct]
        failed = [r for result, r in zip(group, rewards, strict=True) if not result.correct]
        target(max(failed) - min(correct), label=f"{variant.value}: failed minus correct (never above 0)")
        _check_ranking(group, rewards, variant)
        for result, reward in zip(group, rewards, strict=True):
            if result.verdict in HACKS:
                assert reward == min(rewards)


@given(st.data(), groups, valid_settings(st.sampled_from([Variant.GROUP, Variant.DECOUPLED])))
def test_below_tau_speed_never_changes_a_reward(
    data: st.DataObject, group: list[EvalResult], settings: CagrpoSettings
) -> None:
    rate = correct_rate(group)
    assume(rate < 1.0)
    settings = attrs.evolve(settings, tau=data.draw(st.floats(rate, 1.0, exclude_min=True)))
    other_speeds = [attrs.evolve(result, speedups=data.draw(speedup_maps)) for result in group]
    shaped = shape_group(group, settings)
    assert not shaped.decision.open
    assert shape_group(other_speeds, settings).rewards == shaped.rewards


@given(st.data(), groups, valid_settings(st.just(Variant.GLOBAL)), histories)
def test_global_closed_gate_ignores_speed(
    data: st.DataObject, group: list[EvalResult], settings: CagrpoSettings, history: CorrectnessAverage
) -> None:
    # A fresh average gates on the group's own rate (not the division, one rounding off).
    gate_rate = history.updated(correct_rate(group), settings.global_momentum).value if history.groups else correct_rate(group)
    assert gate_rate is not None
    assume(gate_rate < 1.0)
    settings = attrs.evolve(settings, tau=data.draw(st.floats(gate_rate, 1.0, exclude_min=True)))
    shaped = shape_group(group, settings, history)
    assert not shaped.decision.open
    other_speeds = [attrs.evolve(result, speedups=data.draw(speedup_maps)) for result in group]
    assert shape_group(other_speeds, settings, history).rewards == shaped.rewards


@given(st.data(), groups, valid_settings(), histories)
def test_above_tau_a_faster_correct_sample_never_ranks_below_a_slower_one(
    data: st.DataObject, group: list[EvalResult], settings: CagrpoSettings, history: CorrectnessAverage
) -> None:
    rate = correct_rate(group)
    assume(rate > 0.0)
    settings = attrs.evolve(settings, tau=data.draw(st.floats(0.0, rate, exclude_min=True)))
    if settings.variant is Variant.GLOBAL:
        history = CorrectnessAverage()  # a fresh average starts at this group's rate
    shaped = shape_group(group, settings, history)
    assert shaped.decision.open
    measured = [
        (result.speedups[settings.speed_baseline], reward)
        for result, reward in zip(group, shaped.rewards, strict=True)
        if result.correct
        and math.isfinite(result.speedups.get(settings.speed_baseline, math.nan))
        and result.speedups[settings.speed_baseline] > 0
    ]
    for faster, faster_reward in measured:
        for slower, slower_reward in measured:
            if faster > slower:
                assert faster_reward >= slower_reward


@given(groups, valid_settings(), histories)
def test_hacks_get_the_minimum_and_everything_is_finite(
    group: list[EvalResult], settings: CagrpoSettings, history: CorrectnessAverage
) -> None:
    rewards = shape_group(group, settings, history).rewards
    assert len(rewards) == len(group)
    assert all(math.isfinite(reward) for reward in rewards)
    for result, reward in zip(group, rewards, strict=True):
        if result.verdict in HACKS:
            assert reward == min(rewards)


@given(groups, valid_settings(st.just(Variant.DECOUPLED)))
def test_decoupled_values_are_advantages(group: list[EvalResult], settings: CagrpoSettings) -> None:
    rewards = shape_group(group, settings).rewards
    scale = max(1.0, *(abs(reward) for reward in rewards))
    assert abs(math.fsum(rewards)) <= 1e-9 * scale * len(rewards)


@given(groups, valid_settings(st.just(Variant.GLOBAL)), histories)
def test_global_with_no_memory_is_design_a(
    group: list[EvalResult], settings: CagrpoSettings, history: CorrectnessAverage
) -> None:
    memoryless = attrs.evolve(settings, global_momentum=0.0)
    design_a = attrs.evolve(settings, variant=Variant.GROUP)
    assert shape_group(group, memoryless, history).rewards == shape_group(group, design_a).rewards


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30), st.floats(0.0, 0.999))
def test_running_average_is_a_weighted_mean_of_the_rates(rates: list[float], momentum: float) -> None:
    average = _fold(CorrectnessAverage(), [(rate, momentum) for rate in rates])
    assert average.groups == len(rates)
    assert average.value is not None
    assert min(rates) - 1e-12 <= average.value <= max(rates) + 1e-12
    weights = [momentum ** (len(rates) - 1 - k) * (1.0 - momentum) for k in range(len(rates))]
    expected = math.fsum(w * r for w, r in zip(weights, rates, strict=True)) / math.fsum(weights)
    assert math.isclose(average.value, expected, rel_tol=1e-9, abs_tol=1e-12)
