"""Exact values of the reward arithmetic, variant by variant."""

from __future__ import annotations

import math

import pytest

from kz_core.config import load_config
from kz_core.model import EvalResult, Verdict
from kz_reward_cagrpo.settings import CagrpoSettings, Variant, settings_from_config
from kz_reward_cagrpo.shaping import (
    CorrectnessAverage,
    failure_reward,
    base_score,
    measured_speedup,
    shape_group,
    speed_term,
)


def result(verdict: Verdict, speedup: float | None = None, sample_id: str = "0", baseline: str = "eager") -> EvalResult:
    speedups = {} if speedup is None else {baseline: speedup}
    return EvalResult(problem="relu", sample_id=sample_id, backend="triton", verdict=verdict, speedups=speedups)


def settings(*overrides: str) -> CagrpoSettings:
    return settings_from_config(load_config(None, list(overrides)).reward)


CORRECT = Verdict.CORRECT
INCORRECT = Verdict.INCORRECT


# --- pieces ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (Verdict.INCORRECT, 0.0),
        (Verdict.COMPILE_ERROR, -0.25),
        (Verdict.RUNTIME_ERROR, -0.5),
        (Verdict.TIMEOUT, -0.5),
        (Verdict.FORMAT_ERROR, -1.0),
        (Verdict.REJECTED, -1.0),
    ],
)
def test_failure_reward_by_verdict(verdict: Verdict, expected: float) -> None:
    assert failure_reward(verdict, settings("reward.compile_error_reward=-0.25")) == expected


def test_correct_has_no_failure_reward() -> None:
    with pytest.raises(ValueError, match="not a failure"):
        failure_reward(Verdict.CORRECT, CagrpoSettings())


@pytest.mark.parametrize(
    ("speedup", "expected"),
    [(2.0, 1.0), (0.5, -1.0), (1.0, 0.0), (math.sqrt(2.0), 0.5), (64.0, 1.5), (1 / 64, -1.5), (None, 0.0)],
)
def test_speed_term_is_clipped_log2(speedup: float | None, expected: float) -> None:
    assert speed_term(speedup, 1.5) == pytest.approx(expected)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -2.0])
def test_unusable_speedups_count_as_not_measured(bad: float) -> None:
    assert measured_speedup(result(CORRECT, bad), "eager") is None
    assert measured_speedup(result(CORRECT, 3.0), "eager") == 3.0
    assert measured_speedup(result(CORRECT, 3.0), "compile") is None


def test_a_speedup_timed_in_the_candidates_own_process_earns_no_speed_term() -> None:
    """A cuda_inline forward that could not be recorded for the trusted executor ran and was
    timed in its own process (unverified_execution), whose clock it could rewrite: correct
    still counts, its speedup does not (a candidate taking that route on purpose gains no
    speed reward)."""
    import attrs

    from kz_core.model import Finding, Severity

    honest = result(CORRECT, 1000.0)
    unverified = attrs.evolve(honest, findings=(Finding("unverified_execution", "timed in its own process", Severity.WARNING),))
    assert measured_speedup(honest, "eager") == 1000.0
    assert measured_speedup(unverified, "eager") is None
    assert base_score(unverified, settings()) == base_score(honest, settings()) == 1.0
    # Likewise one not timed on unseen inputs (its graph capture failed), whose memoising
    # could not have been found out.
    unchecked = attrs.evolve(honest, findings=(Finding("unseen_not_timed", "not timed on inputs it had never seen", Severity.WARNING),))
    assert measured_speedup(unchecked, "eager") is None


# --- design A: group --------------------------------------------------------------------


def test_group_below_tau_is_correctness_only() -> None:
    group = [result(CORRECT, 4.0), result(INCORRECT), result(Verdict.COMPILE_ERROR), result(Verdict.REJECTED)]
    shaped = shape_group(group, settings("reward.tau=0.5"))
    assert shaped.rewards == (1.0, 0.0, -0.5, -1.0)
    assert not shaped.decision.open
    assert shaped.decision.group_rate == 0.25
    assert shaped.decision.speed_measured == 1
    assert not shaped.decision.speed_applied


def test_group_at_tau_adds_the_clipped_speed_term() -> None:
    group = [
        result(CORRECT, 2.0),
        result(CORRECT, 0.5),
        result(CORRECT, 16.0),  # clipped at +1
        result(CORRECT),  # not measured: g = 0
        result(Verdict.TIMEOUT),
        result(Verdict.FORMAT_ERROR),
        result(INCORRECT, 3.0),  # a wrong sample's speed never counts
        result(CORRECT, math.sqrt(2.0)),
    ]
    shaped = shape_group(group, settings("reward.tau=0.625", "reward.speed_weight=0.5"))
    assert shaped.decision.open
    assert shaped.decision.group_rate == 0.625
    assert shaped.decision.speed_measured == 4
    assert shaped.rewards == pytest.approx((1.5, 0.5, 1.5, 1.0, -0.5, -1.0, 0.0, 1.25))


def test_group_uses_the_configured_baseline() -> None:
    group = [result(CORRECT, 2.0, baseline="compile"), result(CORRECT, 2.0, baseline="eager")]
    shaped = shape_group(group, settings("reward.speed_baseline=compile"))
    assert shaped.rewards == (1.5, 1.0)
    assert shaped.decision.speed_measured == 1


def test_cpu_group_without_speedups_is_correctness_only_even_with_the_gate_open() -> None:
    shaped = shape_group([result(CORRECT), result(CORRECT), result(INCORRECT)], CagrpoSettings())
    assert shaped.rewards == (1.0, 1.0, 0.0)
    assert shaped.decision.open
    assert not shaped.decision.speed_measurable


def test_empty_group() -> None:
    shaped = shape_group([], CagrpoSettings(variant=Variant.GLOBAL))
    assert shaped.rewards == ()
    assert not shaped.decision.open
    assert shaped.decision.group_size == 0
    assert shaped.average == CorrectnessAverage()


def test_tau_one_needs_every_sample_correct() -> None:
    almost = [result(CORRECT, 2.0)] * 3 + [result(INCORRECT)]
    assert shape_group(almost, settings("reward.tau=1.0")).rewards == (1.0, 1.0, 1.0, 0.0)
    assert shape_group(almost[:3], settings("reward.tau=1.0")).rewards == (1.5, 1.5, 1.5)


# --- design B: decoupled ----------------------------------------------------------------


def test_decoupled_above_tau() -> None:
    group = [result(CORRECT, 2.0), result(CORRECT, 0.5), result(INCORRECT), result(Verdict.REJECTED)]
    shaped = shape_group(group, settings("reward.options.variant=decoupled"))
    # Base scores (1, 1, 0, -1) centred on 0.25; speed terms (1, -1) centred on 0, times 0.5.
    assert shaped.rewards == pytest.approx((1.25, 0.25, -0.25, -1.25))
    assert math.fsum(shaped.rewards) == pytest.approx(0.0, abs=1e-12)


def test_decoupled_below_tau_is_centred_correctness() -> None:
    group = [result(CORRECT, 2.0), result(INCORRECT), result(INCORRECT), result(Verdict.COMPILE_ERROR)]
    shaped = shape_group(group, settings("reward.options.variant=decoupled"))
    # Base scores (1, 0, 0, -0.5), mean 0.125.
    assert shaped.rewards == pytest.approx((0.875, -0.125, -0.125, -0.625))
    assert not shaped.decision.open


def test_decoupled_speed_advantage_is_centred_over_correct_samples_only() -> None:
    group = [result(CORRECT, 4.0), result(CORRECT, 1.0), result(CORRECT, 1.0), result(INCORRECT)]
    shaped = shape_group(
        group, settings("reward.options.variant=decoupled", "reward.speed_clip=2", "reward.speed_weight=0.25")
    )
    # Base (1, 1, 1, 0) mean 0.75; g = (2, 0, 0), mean 2/3; 0.25 * (g - 2/3).
    assert shaped.rewards == pytest.approx((0.25 + 1 / 3, 0.25 - 1 / 6, 0.25 - 1 / 6, -0.75))


def test_decoupled_single_correct_sample_gets_no_speed_advantage() -> None:
    group = [result(CORRECT, 8.0), result(INCORRECT)]
    shaped = shape_group(group, settings("reward.options.variant=decoupled"))
    assert shaped.rewards == (0.5, -0.5)


# --- design C: global -------------------------------------------------------------------


def test_correctness_average_is_bias_corrected() -> None:
    average = CorrectnessAverage().updated(1.0, 0.9)
    assert average.value == 1.0
    average = average.updated(0.0, 0.9)
    # Weights 0.09 and 0.1 over a total of 0.19.
    assert average.value == pytest.approx(0.09 / 0.19)
    assert average.groups == 2
    assert CorrectnessAverage().value is None


def test_global_gate_follows_the_running_average_not_the_group() -> None:
    config = settings("reward.options.variant=global", "reward.options.global_momentum=0.5", "reward.tau=0.5")
    strong = [result(CORRECT, 2.0)] * 4
    weak = [result(CORRECT, 2.0), result(INCORRECT), result(INCORRECT), result(INCORRECT)]

    first = shape_group(strong, config)
    assert first.decision.gate_rate == 1.0
    assert first.rewards == (1.5,) * 4

    # The group's own rate (0.25) is below tau, but the average (0.5*0.5*1 + 0.5*0.25)/0.75
    # = 0.5 is not: the gate stays open.
    second = shape_group(weak, config, first.average)
    assert second.decision.group_rate == 0.25
    assert second.decision.gate_rate == pytest.approx(0.5)
    assert second.decision.open
    assert second.rewards == (1.5, 0.0, 0.0, 0.0)

    third = shape_group(weak, config, second.average)
    assert not third.decision.open
    assert third.rewards == (1.0, 0.0, 0.0, 0.0)


def test_global_gate_can_stay_closed_for_a_perfect_group() -> None:
    config = settings("reward.options.variant=global", "reward.tau=0.5")
    history = CorrectnessAverage()
    for _ in range(5):
        history = history.updated(0.0, 0.9)
    shaped = shape_group([result(CORRECT, 2.0), result(CORRECT, 2.0)], config, history)
    assert shaped.decision.group_rate == 1.0
    assert not shaped.decision.open
    assert shaped.rewards == (1.0, 1.0)


def test_other_variants_leave_the_average_alone() -> None:
    history = CorrectnessAverage().updated(0.3, 0.9)
    for variant in (Variant.GROUP, Variant.DECOUPLED):
        shaped = shape_group([result(CORRECT)], CagrpoSettings(variant=variant), history)
        assert shaped.average == history


def test_tau_zero_is_plain_grpo_with_the_speed_term_always_on() -> None:
    """The ablation of the gate: with tau = 0 a group whose correctness is below any gate
    still has its correct samples ranked by speed."""
    fast = result(Verdict.CORRECT, 4.0)
    slow = result(Verdict.CORRECT, 0.5)
    group = [fast, slow] + [result(Verdict.INCORRECT)] * 6  # p = 0.25
    gated = shape_group(group, settings("reward.tau=0.5"))
    ungated = shape_group(group, settings("reward.tau=0"))
    assert gated.rewards[0] == gated.rewards[1] == 1.0
    assert ungated.rewards[0] > 1.0 > ungated.rewards[1] and ungated.decision.open


def test_a_fresh_global_average_gates_on_the_groups_own_rate() -> None:
    """Found by the property test in a fresh clone: four correct of five with momentum
    0.298828125 gave a running average of 0.7999999999999999, and tau = 0.8 closed the gate
    on a group whose rate is exactly tau."""
    config = settings("reward.options.variant=global", "reward.options.global_momentum=0.298828125", "reward.tau=0.8")
    group = [result(Verdict.CORRECT) for _ in range(4)] + [result(Verdict.INCORRECT)]
    shaped = shape_group(group, config, CorrectnessAverage())
    assert shaped.decision.gate_rate == 0.8 and shaped.decision.open
