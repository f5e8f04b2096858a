"""The Proposer's reward, learnability: a default plugin answering ``shape_rewards``.

It answers ``role == "proposer"`` when ``config.reward == "learnability"``; ``config`` is
then the ``proposer`` section (:class:`kz_core.config.ProposerConfig`), not ``reward``.

Convention for the Proposer (independent of any hook spec's wording): one call is about
one proposed module. For a valid module, ``results`` are the Coder's evaluation results
on it (``proposer.coder_samples`` of them); an invalid module is passed as a single
result made by :func:`invalid_module_result` (verdict ``format_error``, sample id
:data:`INVALID_MODULE`, validation's findings). The reply has one reward per result (one
when there are none), all equal: the module's reward, which the caller reads from the first.

- invalid module: -1, the lowest;
- valid module, the Coder solving a share p of its samples: ``absolute_zero``
  learnability ``1 - p`` for ``0 < p < 1`` and 0 at p = 0 or 1, or ``r_zero``
  ``1 - 2|p - 1/2|``; no results at all (nothing sampled) give 0.

Rewards are in [-1, 1]. The penalty for repeating another module of the same batch is
the reward callable's (``kz_core.rewards.proposer``), not this plugin's.
The plugin runs first (``tryfirst``), so that reward plugins written for the Coder's
``reward`` section never see the ``proposer`` section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kz_core.config import ConfigError
from kz_core.hookspecs import hookimpl
from kz_core.model import EvalResult, Finding, Verdict

#: ``proposer.reward`` value this plugin answers.
REWARD_NAME = "learnability"
#: The role it answers.
PROPOSER_ROLE = "proposer"
#: Sample id of the single result standing for an invalid module.
INVALID_MODULE = "invalid_module"
#: Reward of an invalid module: below every valid module's.
INVALID_REWARD = -1.0
#: ``proposer.learnability`` values.
LEARNABILITY = ("absolute_zero", "r_zero")


def invalid_module_result(name: str, findings: Sequence[Finding] = ()) -> EvalResult:
    """The single result that stands for an invalid module in ``shape_rewards``."""
    reason = next((f.check for f in findings), "invalid")
    return EvalResult(
        problem=name,
        sample_id=INVALID_MODULE,
        backend="",
        verdict=Verdict.FORMAT_ERROR,
        findings=tuple(findings),
        message=f"invalid module: {reason}",
    )


def is_invalid_module(results: Sequence[EvalResult]) -> bool:
    """Whether ``results`` stand for an invalid module (see the module docstring)."""
    return len(results) == 1 and results[0].verdict is Verdict.FORMAT_ERROR and results[0].sample_id == INVALID_MODULE


def learnability(pass_rate: float, kind: str = "absolute_zero") -> float:
    """The learnability of a module the Coder solves with rate ``pass_rate`` (0..1).

    :raises ValueError: an unknown ``kind`` or a rate outside [0, 1].
    """
    if not 0.0 <= pass_rate <= 1.0:
        raise ValueError(f"a pass rate is in [0, 1], not {pass_rate}")
    if kind == "absolute_zero":
        return 1.0 - pass_rate if 0.0 < pass_rate < 1.0 else 0.0
    if kind == "r_zero":
        return 1.0 - 2.0 * abs(pass_rate - 0.5)
    raise ConfigError(f"proposer.learnability={kind!r}: use one of {', '.join(LEARNABILITY)}")


def module_reward(results: Sequence[EvalResult], kind: str = "absolute_zero") -> float:
    """The reward of one proposed module from the Coder's results on it (see the docstring)."""
    if is_invalid_module(results):
        return INVALID_REWARD
    if not results:
        return 0.0
    return learnability(sum(r.correct for r in results) / len(results), kind)


@hookimpl(tryfirst=True)
def shape_rewards(role: str, results: Sequence[EvalResult], config: Any) -> list[float] | None:
    """Learnability rewards for a proposed module; None for other roles and rewards."""
    if role != PROPOSER_ROLE or getattr(config, "reward", None) != REWARD_NAME:
        return None
    reward = module_reward(results, config.learnability)
    return [reward] * max(1, len(results))
