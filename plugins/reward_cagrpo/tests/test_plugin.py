"""The ``shape_rewards`` hook: who it answers, the state it keeps, what it logs."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator, Sequence
from typing import Any

import pluggy
import pytest
from loguru import logger

from kz_core import hookimpl, hookspecs
from kz_core.config import load_config
from kz_core.model import EvalResult, Verdict
from kz_reward_cagrpo import plugin
from kz_reward_cagrpo.settings import RewardConfigError, Variant
from kz_reward_cagrpo.shaping import CorrectnessAverage


def result(verdict: Verdict, speedup: float | None = None) -> EvalResult:
    speedups = {} if speedup is None else {"eager": speedup}
    return EvalResult(problem="softmax", sample_id="0", backend="triton", verdict=verdict, speedups=speedups)


def reward_section(*overrides: str) -> Any:
    return load_config(None, list(overrides)).reward


GROUP = [
    result(Verdict.CORRECT, 2.0),
    result(Verdict.CORRECT, 0.5),
    result(Verdict.INCORRECT),
    result(Verdict.REJECTED),
]


class OtherReward:
    """A test plugin answering for ``reward.name == "other"``."""

    @hookimpl
    def shape_rewards(self, role: str, results: Sequence[EvalResult], config: Any) -> list[float] | None:
        return [7.0] * len(results) if config.name == "other" else None


@pytest.fixture
def plugin_manager() -> Iterator[pluggy.PluginManager]:
    manager = pluggy.PluginManager("kz")
    manager.add_hookspecs(hookspecs)
    manager.register(plugin, name="reward_cagrpo")
    other = OtherReward()
    manager.register(other, name="other_reward")
    manager.check_pending()
    yield manager
    manager.unregister(other)
    manager.unregister(plugin)


@pytest.fixture
def log_records() -> Iterator[list[tuple[str, str]]]:
    records: list[tuple[str, str]] = []
    sink = logger.add(
        lambda message: records.append((message.record["level"].name, message.record["message"])), level="DEBUG"
    )
    yield records
    logger.remove(sink)


def test_answers_for_cagrpo_and_the_coder(plugin_manager: pluggy.PluginManager) -> None:
    rewards = plugin_manager.hook.shape_rewards(role="coder", results=GROUP, config=reward_section())
    assert rewards == [1.5, 0.5, 0.0, -1.0]


def test_leaves_other_rewards_to_their_plugins(plugin_manager: pluggy.PluginManager) -> None:
    config = reward_section("reward.name=other")
    assert plugin.shape_rewards(role="coder", results=GROUP, config=config) is None
    assert plugin_manager.hook.shape_rewards(role="coder", results=GROUP, config=config) == [7.0] * 4


@pytest.mark.parametrize("role", ["proposer", "Coder", ""])
def test_returns_none_for_other_roles(role: str) -> None:
    assert plugin.shape_rewards(role=role, results=GROUP, config=reward_section()) is None
    assert plugin.last_gate_decision() is None


def test_invalid_config_raises_a_config_error_naming_the_key(plugin_manager: pluggy.PluginManager) -> None:
    with pytest.raises(RewardConfigError, match=r"reward\.tau"):
        plugin_manager.hook.shape_rewards(role="coder", results=GROUP, config=reward_section("reward.tau=1.5"))


def test_last_gate_decision_is_inspectable_and_resettable() -> None:
    assert plugin.last_gate_decision() is None
    plugin.shape_rewards(role="coder", results=GROUP[2:], config=reward_section())
    decision = plugin.last_gate_decision()
    assert decision is not None
    assert (decision.problem, decision.group_size, decision.correct, decision.open) == ("softmax", 2, 0, False)
    plugin.shape_rewards(role="coder", results=GROUP, config=reward_section())
    decision = plugin.last_gate_decision()
    assert decision is not None
    assert decision.open and decision.speed_applied and decision.group_rate == 0.5
    plugin.reset_state()
    assert plugin.last_gate_decision() is None


def test_global_variant_keeps_its_average_across_calls() -> None:
    config = reward_section("reward.options.variant=global", "reward.options.global_momentum=0.5")
    perfect = [result(Verdict.CORRECT, 2.0)] * 2
    poor = [
        result(Verdict.CORRECT, 2.0),
        result(Verdict.INCORRECT),
        result(Verdict.INCORRECT),
        result(Verdict.INCORRECT),
    ]
    assert plugin.shape_rewards(role="coder", results=perfect, config=config) == [1.5, 1.5]
    # The group alone (0.25) would close the gate; the running average (0.5) keeps it open.
    assert plugin.shape_rewards(role="coder", results=poor, config=config) == [1.5, 0.0, 0.0, 0.0]
    assert plugin.running_correctness().groups == 2
    decision = plugin.last_gate_decision()
    assert decision is not None and decision.variant is Variant.GLOBAL and decision.gate_rate == 0.5
    plugin.reset_state()
    assert plugin.running_correctness() == CorrectnessAverage()
    # Forgotten: this group now decides alone, and 0.25 < tau.
    assert plugin.shape_rewards(role="coder", results=poor, config=config) == [1.0, 0.0, 0.0, 0.0]


def test_decoupled_variant_through_the_hook() -> None:
    rewards = plugin.shape_rewards(
        role="coder", results=GROUP, config=reward_section("reward.options.variant=decoupled")
    )
    assert rewards == pytest.approx([1.25, 0.25, -0.25, -1.25])


def test_each_decision_is_logged_at_debug(log_records: list[tuple[str, str]]) -> None:
    plugin.shape_rewards(role="coder", results=GROUP, config=reward_section())
    debug = [message for level, message in log_records if level == "DEBUG"]
    assert len(debug) == 1
    assert "'softmax'" in debug[0] and "2/4 correct" in debug[0] and "open" in debug[0]


def test_unmeasured_speed_is_logged_once(log_records: list[tuple[str, str]]) -> None:
    cpu_group = [result(Verdict.CORRECT), result(Verdict.CORRECT), result(Verdict.INCORRECT)]
    for _ in range(3):
        assert plugin.shape_rewards(role="coder", results=cpu_group, config=reward_section()) == [1.0, 1.0, 0.0]
    notices = [message for level, message in log_records if "speed was not measured" in message]
    assert len(notices) == 1
    assert "'eager'" in notices[0]
    plugin.reset_state()
    plugin.shape_rewards(role="coder", results=cpu_group, config=reward_section())
    assert len([message for _, message in log_records if "speed was not measured" in message]) == 2


def test_measured_speed_is_not_reported_as_unmeasured(log_records: list[tuple[str, str]]) -> None:
    plugin.shape_rewards(role="coder", results=GROUP, config=reward_section())
    plugin.shape_rewards(role="coder", results=[result(Verdict.INCORRECT)], config=reward_section())
    assert not [message for _, message in log_records if "speed was not measured" in message]


def test_entry_point_names_the_plugin_module() -> None:
    entry_points = [ep for ep in importlib.metadata.entry_points(group="kz") if ep.name == "reward_cagrpo"]
    assert len(entry_points) == 1
    assert entry_points[0].load() is plugin
