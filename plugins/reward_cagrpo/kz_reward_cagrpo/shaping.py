"""CA-GRPO reward arithmetic: a group of evaluation results becomes one number per sample.

Correctness-aware GRPO rewards speed only once correctness is reliable. For a group of G
results for one problem, c_i = 1 when the verdict is ``correct`` and p = mean(c). With
g(s) = clip(log2(s), -speed_clip, speed_clip) of the speedup s against
``speed_baseline`` (g = 0 when no speedup was measured, as on a CPU):

- ``group`` (design A, default): r_i = c_i while p < tau, and r_i = c_i * (1 + lambda *
  g(s_i)) once p >= tau. Failed samples earn their verdict's failure reward instead:
  ``incorrect`` -> incorrect_reward; ``compile_error`` -> compile_error_reward;
  ``runtime_error`` and ``timeout`` -> runtime_error_reward; ``format_error`` and
  ``rejected`` -> hack_reward, the lowest.
- ``decoupled`` (design B): the values are advantages already, so the trainer must not
  centre or scale them again (TRL: ``scale_rewards="none"``; GRPO still subtracts the
  group mean, which is zero here up to rounding). a_i = (b_i - mean(b)) + d_i, where b_i is
  the design-A reward without the speed term (1 for correct, the failure reward otherwise:
  centred correctness that still ranks hacks lowest), and d_i, once p >= tau, is
  lambda * (g_i - mean of g over the correct samples) for correct samples and 0 for the
  others. Speed thus reorders the correct samples without moving the group's correctness
  signal.
- ``global`` (design C): design A, with the gate comparing tau to a running average of
  correctness over groups (:class:`CorrectnessAverage`, this group included) instead of p.

With the settings :func:`kz_reward_cagrpo.settings.settings_from_config` accepts, a correct
sample never ranks below a failed one, a faster correct sample never ranks below a slower
one, below the gate speed changes nothing, format errors and hacks get the group's minimum,
and every value is finite.

Everything here is a pure function of its arguments: no pluggy, no logging, no module
state. The plugin (``plugin.py``) keeps the running average between calls and logs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from kz_core import EvalResult, Verdict
from kz_reward_cagrpo.settings import CagrpoSettings, Variant


@attrs.frozen
class CorrectnessAverage:
    """A running (exponential moving) average of group correctness rates, bias-corrected.

    After groups with rates p_1..p_t and momentum m, the value is
    sum_k m^(t-k) (1-m) p_k / sum_k m^(t-k) (1-m): a weighted mean of the rates seen, the
    newest weighing most. Its first value is the first group's rate (no pull towards 0).

    :ivar weighted_sum: sum of the weighted rates.
    :ivar weight: sum of the weights (1 - m^t for a constant momentum).
    :ivar groups: how many groups went in.
    """

    weighted_sum: float = 0.0
    weight: float = 0.0
    groups: int = 0

    @property
    def value(self) -> float | None:
        """The average, or None before the first group."""
        return self.weighted_sum / self.weight if self.weight > 0.0 else None

    def updated(self, rate: float, momentum: float) -> CorrectnessAverage:
        """This average with one more group's correctness rate folded in.

        :param rate: the group's correctness rate, in [0, 1].
        :param momentum: the past's weight, in [0, 1); 0 keeps only ``rate``.
        :returns: a new :class:`CorrectnessAverage`; this one is unchanged.
        """
        return CorrectnessAverage(
            weighted_sum=momentum * self.weighted_sum + (1.0 - momentum) * rate,
            weight=momentum * self.weight + (1.0 - momentum),
            groups=self.groups + 1,
        )


@attrs.frozen
class GateDecision:
    """What the gate saw and decided for one group; what the plugin logs and exposes.

    :ivar variant: the variant that shaped the group.
    :ivar problem: the group's problem name (the first result's), empty for an empty group.
    :ivar group_size: G, the number of results.
    :ivar correct: how many results were correct.
    :ivar group_rate: the group's correctness rate p (0 for an empty group).
    :ivar gate_rate: the rate compared with tau: p, or the running average (``global``).
    :ivar tau: the threshold.
    :ivar open: whether the speed term applied (gate_rate >= tau).
    :ivar speed_measured: correct samples carrying a usable speedup against the baseline.
    :ivar speed_baseline: the baseline the speedups are taken against.
    """

    variant: Variant
    problem: str
    group_size: int
    correct: int
    group_rate: float
    gate_rate: float
    tau: float
    open: bool
    speed_measured: int
    speed_baseline: str

    @property
    def speed_measurable(self) -> bool:
        """Whether any correct sample carried a speedup (never on a CPU)."""
        return self.speed_measured > 0

    @property
    def speed_applied(self) -> bool:
        """Whether speed changed any reward: the gate is open and speed was measured."""
        return self.open and self.speed_measurable


@attrs.frozen
class ShapedGroup:
    """The outcome of shaping one group.

    :ivar rewards: one finite value per result, in order (advantages for ``decoupled``).
    :ivar decision: the gate's decision.
    :ivar average: the running correctness average after this group (updated by the
        ``global`` variant only; passed through unchanged by the others).
    """

    rewards: tuple[float, ...]
    decision: GateDecision
    average: CorrectnessAverage


#: The finding of a result whose forward ran and was timed in the candidate's own process.
UNVERIFIED = "unverified_execution"

#: The finding of a GPU result that could not be timed on unseen inputs (its graph capture
#: failed): a memoising kernel would not have been found out, so its speed is not paid.
UNSEEN_NOT_TIMED = "unseen_not_timed"

def failure_reward(verdict: Verdict, settings: CagrpoSettings) -> float:
    """The reward of a failed sample, by verdict.

    :param verdict: any verdict but ``correct``.
    :param settings: the reward's settings.
    :returns: the configured reward for that kind of failure.
    :raises ValueError: for ``correct``, which has no failure reward.
    """
    if verdict is Verdict.INCORRECT:
        return settings.incorrect_reward
    if verdict is Verdict.COMPILE_ERROR:
        return settings.compile_error_reward
    if verdict in (Verdict.RUNTIME_ERROR, Verdict.TIMEOUT):
        return settings.runtime_error_reward
    if verdict in (Verdict.FORMAT_ERROR, Verdict.REJECTED):
        return settings.hack_reward
    raise ValueError(f"verdict {verdict.value!r} is not a failure and has no failure reward")


def base_score(result: EvalResult, settings: CagrpoSettings) -> float:
    """1 for a correct result, its failure reward otherwise: the reward without speed."""
    return 1.0 if result.correct else failure_reward(result.verdict, settings)


def measured_speedup(result: EvalResult, baseline: str) -> float | None:
    """The result's speedup against ``baseline`` when it is usable (finite, > 0), else None.

    CPU results never carry speedups; a missing, non-finite or non-positive value counts
    as not measured, and so does the speedup of a result timed in the candidate's own
    process (finding ``unverified_execution``: a ``cuda_inline`` forward that could not be
    recorded for the trusted executor), which the candidate could have bent: taking that
    route on purpose earns no speed term; likewise a result not timed on unseen inputs
    (finding ``unseen_not_timed``), whose memoisation would have gone unseen.
    """
    if any(finding.check in (UNVERIFIED, UNSEEN_NOT_TIMED) for finding in result.findings):
        return None
    speedup = result.speedups.get(baseline)
    if speedup is None or not math.isfinite(speedup) or speedup <= 0.0:
        return None
    return float(speedup)


def speed_term(speedup: float | None, speed_clip: float) -> float:
    """g(s) = clip(log2(s), -speed_clip, speed_clip), and 0 for an unmeasured speedup."""
    if speedup is None:
        return 0.0
    return min(speed_clip, max(-speed_clip, math.log2(speedup)))


def correct_rate(results: Sequence[EvalResult]) -> float:
    """The fraction of correct results, p; 0 for an empty group."""
    return sum(1 for result in results if result.correct) / len(results) if results else 0.0


def _mean(values: Sequence[float]) -> float:
    # Dividing first keeps the sum of large rewards from overflowing.
    return math.fsum(value / len(values) for value in values)


def _group_rewards(
    results: Sequence[EvalResult], speeds: Sequence[float], gate_open: bool, settings: CagrpoSettings
) -> list[float]:
    rewards = []
    for result, g in zip(results, speeds, strict=True):
        if not result.correct:
            rewards.append(failure_reward(result.verdict, settings))
        elif gate_open:
            rewards.append(1.0 + settings.speed_weight * g)
        else:
            rewards.append(1.0)
    return rewards


def _decoupled_advantages(
    results: Sequence[EvalResult], speeds: Sequence[float], gate_open: bool, settings: CagrpoSettings
) -> list[float]:
    scores = [base_score(result, settings) for result in results]
    centre = _mean(scores)
    correct_speeds = [g for result, g in zip(results, speeds, strict=True) if result.correct]
    mean_speed = 0.0
    if gate_open and correct_speeds:
        # Clamped into the range of the terms it averages, which rounding could leave.
        mean_speed = min(max(correct_speeds), max(min(correct_speeds), _mean(correct_speeds)))
    advantages = []
    for result, score, g in zip(results, scores, speeds, strict=True):
        speed_advantage = settings.speed_weight * (g - mean_speed) if gate_open and result.correct else 0.0
        advantages.append((score + speed_advantage) - centre)
    return advantages


def shape_group(
    results: Sequence[EvalResult], settings: CagrpoSettings, average: CorrectnessAverage = CorrectnessAverage()
) -> ShapedGroup:
    """Shape the rewards of one group of results for one problem.

    :param results: the group, one result per sample of the Coder.
    :param settings: validated settings; ``settings.variant`` picks the design.
    :param average: the running correctness average before this group (``global`` only).
    :returns: a :class:`ShapedGroup` with one reward per result in order; an empty group
        gives no rewards, a closed gate, and leaves the average unchanged.
    """
    group_size = len(results)
    correct = sum(1 for result in results if result.correct)
    group_rate = correct_rate(results)
    gate_rate = group_rate
    if settings.variant is Variant.GLOBAL and group_size:
        average = average.updated(group_rate, settings.global_momentum)
        # A fresh average's value is this group's rate; taken as it is, since the division
        # can land one rounding below it (4/5 came out 0.7999999999999999, a closed gate
        # at tau = 0.8).
        gate_rate = average.value if average.value is not None and average.groups > 1 else group_rate
    gate_open = group_size > 0 and gate_rate >= settings.tau
    speedups = [measured_speedup(result, settings.speed_baseline) if result.correct else None for result in results]
    speeds = [speed_term(speedup, settings.speed_clip) for speedup in speedups]
    if settings.variant is Variant.DECOUPLED:
        rewards = _decoupled_advantages(results, speeds, gate_open, settings)
    else:
        rewards = _group_rewards(results, speeds, gate_open, settings)
    decision = GateDecision(
        variant=settings.variant,
        problem=results[0].problem if results else "",
        group_size=group_size,
        correct=correct,
        group_rate=group_rate,
        gate_rate=gate_rate,
        tau=settings.tau,
        open=gate_open,
        speed_measured=sum(1 for speedup in speedups if speedup is not None),
        speed_baseline=settings.speed_baseline,
    )
    return ShapedGroup(rewards=tuple(rewards), decision=decision, average=average)
