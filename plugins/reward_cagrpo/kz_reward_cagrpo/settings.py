"""The CA-GRPO reward's settings: read from the ``reward`` config section and validated.

:func:`settings_from_config` turns a ``reward`` section (the omegaconf view that
:func:`kz_core.config.load_config` returns, with this plugin's :class:`RewardKeys` in it)
into a frozen :class:`CagrpoSettings`, or raises :class:`RewardConfigError` naming the key to
fix. The checks are the ones the reward's ranking contract rests on: with them in place a
correct sample always outranks every failed one, and format errors and hacks earn the least.

This module reads and checks values only: no reward arithmetic (``shaping.py``), no pluggy,
no logging, no state.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

import attrs

from kz_core import ConfigError

#: The ``reward.name`` this plugin answers to.
REWARD_NAME = "cagrpo"

#: Keys this reward understands under ``reward.options``.
KNOWN_OPTIONS: tuple[str, ...] = ("variant", "global_momentum")

#: Default of ``reward.options.global_momentum``.
DEFAULT_GLOBAL_MOMENTUM = 0.9


class RewardConfigError(ConfigError):
    """A ``reward`` setting CA-GRPO cannot work with; the message names the key to fix."""


class Variant(str, enum.Enum):
    """How the speed term is gated and combined (``reward.options.variant``)."""

    #: Design A (default): reward = correctness, plus a clipped speed term for correct
    #: samples once the group's correctness rate reaches tau. Plain rewards; TRL centres them.
    GROUP = "group"
    #: Design B: already advantages. Centred correctness over the group, plus (gate open) a
    #: speed advantage centred over the correct samples only. Use TRL's ``scale_rewards="none"``.
    DECOUPLED = "decoupled"
    #: Design C: as design A, but the gate compares tau with a running average of
    #: correctness over groups (exponential moving average) instead of the group's own rate.
    GLOBAL = "global"


@dataclasses.dataclass
class RewardKeys:
    """The keys CA-GRPO adds to the ``reward`` config section (``register_config``): their
    defaults live here and nowhere else."""

    # CA-GRPO gate: speed counts once a group's correctness rate reaches tau [0..1]; 0: always
    # (plain GRPO with the speed term on), and speed_weight=0 is correctness only: the two
    # ablations of benchmarks/gpu_session.sh ablate-reward.
    tau: float = 0.5
    # Weight of the speed term for correct samples; below 1, so that a correct sample
    # always outranks an incorrect one.
    speed_weight: float = 0.5
    # The speed term is clip(log2(speedup), -speed_clip, speed_clip).
    speed_clip: float = 1.0
    # Reward of an incorrect sample (wrong outputs).
    incorrect_reward: float = 0.0
    # Reward of a sample that failed to compile.
    compile_error_reward: float = -0.5
    # Reward of a sample that raised, crashed or timed out.
    runtime_error_reward: float = -0.5
    # Reward of a format error or a hack caught by a guard: the lowest of all.
    hack_reward: float = -1.0


_DEFAULTS = RewardKeys()


def check_reward_section(section: Any) -> None:
    """``register_config``'s check: the ``reward`` section, when CA-GRPO is the reward."""
    if getattr(section, "name", REWARD_NAME) == REWARD_NAME:
        settings_from_config(section)


@attrs.frozen
class CagrpoSettings:
    """Validated CA-GRPO parameters (see :class:`RewardKeys` for meanings; defaults from there).

    :ivar tau: gate threshold on the correctness rate, in [0, 1]; 0 opens it always (plain
        GRPO with the speed term on: the ablation the method's gate is measured against).
    :ivar speed_weight: lambda, weight of the speed term, in [0, 1).
    :ivar speed_clip: the speed term is clip(log2(speedup), -speed_clip, speed_clip); > 0.
    :ivar speed_baseline: key of ``EvalResult.speedups`` the speed term uses (``eager``).
    :ivar incorrect_reward: reward of a sample with wrong outputs.
    :ivar compile_error_reward: reward of a sample that did not compile.
    :ivar runtime_error_reward: reward of a sample that raised, crashed or timed out.
    :ivar hack_reward: reward of a format error or a rejected (hacking) sample; the lowest.
    :ivar variant: see :class:`Variant`.
    :ivar global_momentum: weight of the past in the running correctness average of the
        ``global`` variant, in [0, 1); 0 makes it the group's own rate.
    """

    tau: float = _DEFAULTS.tau
    speed_weight: float = _DEFAULTS.speed_weight
    speed_clip: float = _DEFAULTS.speed_clip
    speed_baseline: str = "eager"
    incorrect_reward: float = _DEFAULTS.incorrect_reward
    compile_error_reward: float = _DEFAULTS.compile_error_reward
    runtime_error_reward: float = _DEFAULTS.runtime_error_reward
    hack_reward: float = _DEFAULTS.hack_reward
    variant: Variant = Variant.GROUP
    global_momentum: float = DEFAULT_GLOBAL_MOMENTUM

    @property
    def lowest_correct_reward(self) -> float:
        """The least a correct sample can earn in design A: 1 - speed_weight * speed_clip."""
        return 1.0 - self.speed_weight * self.speed_clip

    @property
    def lowest_decoupled_correct_score(self) -> float:
        """Design B's bound: 1 + the most negative speed advantage, 1 - 2 * speed_weight * speed_clip."""
        return 1.0 - 2.0 * self.speed_weight * self.speed_clip


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RewardConfigError(f"{key} must be a number, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not math.isfinite(number):
        raise RewardConfigError(f"{key} must be a finite number, got {value!r}")
    return number


def _parse_options(options: Any) -> tuple[Variant, float]:
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise RewardConfigError(f"reward.options must be a mapping of option names to values, got {options!r}")
    unknown = sorted(str(key) for key in options if key not in KNOWN_OPTIONS)
    if unknown:
        raise RewardConfigError(
            f"reward.options has unknown key(s) {', '.join(unknown)} for reward.name={REWARD_NAME!r}: "
            f"the known options are {', '.join(KNOWN_OPTIONS)}"
        )
    raw_variant = options.get("variant", Variant.GROUP.value)
    try:
        variant = Variant(raw_variant)
    except ValueError:
        choices = ", ".join(v.value for v in Variant)
        raise RewardConfigError(f"reward.options.variant must be one of {choices}, got {raw_variant!r}") from None
    momentum = _number(options.get("global_momentum", DEFAULT_GLOBAL_MOMENTUM), "reward.options.global_momentum")
    if not 0.0 <= momentum < 1.0:
        raise RewardConfigError(
            f"reward.options.global_momentum must be in [0, 1) (the past's weight in the running "
            f"correctness average), got {momentum}"
        )
    return variant, momentum


def settings_from_config(config: Any) -> CagrpoSettings:
    """Read and validate the ``reward`` config section.

    :param config: the ``reward`` section: an omegaconf view of
        :class:`kz_core.config.RewardConfig` or an instance of it.
    :returns: the validated :class:`CagrpoSettings`.
    :raises RewardConfigError: a value out of range or of the wrong type; the message
        names the key (``reward.tau``, ``reward.options.variant``, ...) and what is allowed.
    """
    tau = _number(config.tau, "reward.tau")
    if not 0.0 <= tau <= 1.0:
        raise RewardConfigError(f"reward.tau must be in [0, 1] (a correctness rate; 0 opens the gate always), got {tau}")
    speed_weight = _number(config.speed_weight, "reward.speed_weight")
    if not 0.0 <= speed_weight < 1.0:
        raise RewardConfigError(
            f"reward.speed_weight must be in [0, 1), so that a correct sample always outranks an "
            f"incorrect one, got {speed_weight}"
        )
    speed_clip = _number(config.speed_clip, "reward.speed_clip")
    if not speed_clip > 0.0:
        raise RewardConfigError(f"reward.speed_clip must be > 0 (a bound on |log2(speedup)|), got {speed_clip}")
    speed_baseline = config.speed_baseline
    if not isinstance(speed_baseline, str) or not speed_baseline:
        raise RewardConfigError(
            f"reward.speed_baseline must name a baseline of EvalResult.speedups (eager, compile), "
            f"got {speed_baseline!r}"
        )
    incorrect = _number(config.incorrect_reward, "reward.incorrect_reward")
    compile_error = _number(config.compile_error_reward, "reward.compile_error_reward")
    runtime_error = _number(config.runtime_error_reward, "reward.runtime_error_reward")
    hack = _number(config.hack_reward, "reward.hack_reward")
    for key, value in (("reward.compile_error_reward", compile_error), ("reward.runtime_error_reward", runtime_error)):
        if value > incorrect:
            raise RewardConfigError(
                f"{key} ({value}) must not exceed reward.incorrect_reward ({incorrect}): a sample that "
                f"failed to run must not earn more than one that ran with wrong outputs"
            )
        if hack > value:
            raise RewardConfigError(
                f"reward.hack_reward ({hack}) must not exceed {key} ({value}): format errors and hacks "
                f"earn the lowest reward"
            )
    variant, momentum = _parse_options(config.options)
    settings = CagrpoSettings(
        tau=tau,
        speed_weight=speed_weight,
        speed_clip=speed_clip,
        speed_baseline=speed_baseline,
        incorrect_reward=incorrect,
        compile_error_reward=compile_error,
        runtime_error_reward=runtime_error,
        hack_reward=hack,
        variant=variant,
        global_momentum=momentum,
    )
    if not incorrect < settings.lowest_correct_reward:
        raise RewardConfigError(
            f"reward.incorrect_reward ({incorrect}) must be below the least reward of a correct "
            f"sample, 1 - reward.speed_weight * reward.speed_clip = {settings.lowest_correct_reward:.6g}, "
            f"so that a correct sample always outranks an incorrect one; lower reward.speed_weight, "
            f"reward.speed_clip or reward.incorrect_reward"
        )
    if variant is Variant.DECOUPLED and not incorrect <= settings.lowest_decoupled_correct_score:
        # A correct sample's speed advantage is lambda * (g - mean g) over the correct samples,
        # which lies above -2 * lambda * clip: the log-speedup term spans [-clip, clip].
        raise RewardConfigError(
            f"reward.incorrect_reward ({incorrect}) must be <= 1 - 2 * reward.speed_weight * "
            f"reward.speed_clip = {settings.lowest_decoupled_correct_score:.6g} for "
            f"reward.options.variant=decoupled (the speed advantage, centred over the correct "
            f"samples, spans 2 * speed_weight * speed_clip), so that a correct sample always "
            f"outranks an incorrect one; lower reward.speed_weight, reward.speed_clip or "
            f"reward.incorrect_reward"
        )
    return settings
