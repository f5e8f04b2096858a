"""The kz plugin: answers ``shape_rewards`` for ``reward.name == "cagrpo"`` and the Coder.

It validates the ``reward`` section, shapes each group with
:func:`kz_reward_cagrpo.shaping.shape_group`, and keeps the little state CA-GRPO needs
between groups: the running correctness average of the ``global`` variant and the last
gate decision, both inspectable (:func:`last_gate_decision`, :func:`running_correctness`)
and resettable (:func:`reset_state`, e.g. between training runs or tests). Each decision is
logged at DEBUG; that speed was not measured (no correct sample carried a speedup, as on a
CPU) is logged once at INFO until the state is reset.

The Proposer's reward (learnability) is another plugin's job: this one returns None for
any role but ``coder``. No reward arithmetic lives here (see ``shaping.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from loguru import logger

from kz_core import EvalResult, RewardConfig, hookimpl
from kz_reward_cagrpo.settings import REWARD_NAME, settings_from_config
from kz_reward_cagrpo.shaping import CorrectnessAverage, GateDecision, shape_group

#: The role whose samples this reward shapes.
CODER_ROLE = "coder"


class _GateState:
    """What persists between groups in this process; guarded by ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.average = CorrectnessAverage()
        self.last_decision: GateDecision | None = None
        self.speed_notice_logged = False


_state = _GateState()


def last_gate_decision() -> GateDecision | None:
    """The gate decision of the last group shaped in this process, or None since a reset."""
    with _state.lock:
        return _state.last_decision


def running_correctness() -> CorrectnessAverage:
    """The running correctness average the ``global`` variant gates on."""
    with _state.lock:
        return _state.average


def reset_state() -> None:
    """Forget the running average, the last decision and the logged-once notice."""
    with _state.lock:
        _state.average = CorrectnessAverage()
        _state.last_decision = None
        _state.speed_notice_logged = False


def _log_decision(decision: GateDecision) -> None:
    logger.debug(
        "CA-GRPO {} gate for {!r}: {}/{} correct (p={:.3f}), gate rate {:.3f} {} tau {}: {}; "
        "speed measured for {}/{} correct samples against {!r}",
        decision.variant.value,
        decision.problem,
        decision.correct,
        decision.group_size,
        decision.group_rate,
        decision.gate_rate,
        ">=" if decision.open else "<",
        decision.tau,
        "open" if decision.open else "closed",
        decision.speed_measured,
        decision.correct,
        decision.speed_baseline,
    )


@hookimpl
def register_config(register):
    from kz_core import ConfigSection

    from kz_reward_cagrpo.settings import RewardKeys, check_reward_section

    register(ConfigSection(section="reward", fields=RewardKeys, validate=check_reward_section))


@hookimpl
def shape_rewards(role: str, results: Sequence[EvalResult], config: RewardConfig) -> list[float] | None:
    """CA-GRPO rewards for a group of the Coder's results; None for other rewards and roles.

    :raises kz_reward_cagrpo.settings.RewardConfigError: a ``reward`` setting out of range.
    """
    if role != CODER_ROLE or getattr(config, "name", None) != REWARD_NAME:
        return None
    settings = settings_from_config(config)
    with _state.lock:
        shaped = shape_group(results, settings, _state.average)
        _state.average = shaped.average
        _state.last_decision = shaped.decision
        notify_unmeasured = shaped.decision.correct > 0 and not shaped.decision.speed_measurable
        notify_unmeasured = notify_unmeasured and not _state.speed_notice_logged
        if notify_unmeasured:
            _state.speed_notice_logged = True
    _log_decision(shaped.decision)
    if notify_unmeasured:
        logger.info(
            "CA-GRPO: the speed term is zero because speed was not measured: no correct sample "
            "carries a speedup against {!r} (timings taken on a CPU never give speedups); "
            "rewards are correctness only. Logged once.",
            settings.speed_baseline,
        )
    return list(shaped.rewards)
