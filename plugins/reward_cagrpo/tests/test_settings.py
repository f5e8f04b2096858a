"""Reading and validating the ``reward`` section: defaults pass, each bad key is named."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kz_core.config import ConfigError, load_config, section_type
from kz_reward_cagrpo.settings import CagrpoSettings, RewardConfigError, Variant, settings_from_config

#: The reward section as load_config builds it: the core's keys and this plugin's.
RewardConfig = section_type("reward")


def reward_section(*overrides: str) -> Any:  # omegaconf's read-only view of RewardConfig
    return load_config(None, list(overrides)).reward


def test_defaults_are_valid_and_read_as_design_a() -> None:
    settings = settings_from_config(reward_section())
    assert settings == CagrpoSettings()
    assert settings.variant is Variant.GROUP
    assert settings.global_momentum == 0.9
    assert settings.lowest_correct_reward == 0.5


def test_plain_dataclass_config_is_read_like_the_omegaconf_one() -> None:
    config = RewardConfig(tau=0.25, speed_weight=0.2, options={"variant": "global", "global_momentum": 0.5})
    settings = settings_from_config(config)
    assert settings.tau == 0.25
    assert settings.speed_weight == 0.2
    assert settings.variant is Variant.GLOBAL
    assert settings.global_momentum == 0.5


def test_overrides_are_read() -> None:
    settings = settings_from_config(
        reward_section(
            "reward.tau=1.0",
            "reward.speed_weight=0.25",
            "reward.speed_clip=2.0",
            "reward.speed_baseline=compile",
            "reward.incorrect_reward=-0.1",
            "reward.compile_error_reward=-0.3",
            "reward.runtime_error_reward=-0.2",
            "reward.hack_reward=-2.0",
            "reward.options.variant=decoupled",
        )
    )
    assert settings == CagrpoSettings(
        tau=1.0,
        speed_weight=0.25,
        speed_clip=2.0,
        speed_baseline="compile",
        incorrect_reward=-0.1,
        compile_error_reward=-0.3,
        runtime_error_reward=-0.2,
        hack_reward=-2.0,
        variant=Variant.DECOUPLED,
    )


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["reward.tau=-0.1"], "reward.tau"),
        (["reward.tau=-0.5"], "reward.tau"),
        (["reward.tau=1.01"], "reward.tau"),
        (["reward.tau=nan"], "reward.tau"),
        (["reward.speed_weight=1.0"], "reward.speed_weight"),
        (["reward.speed_weight=-0.1"], "reward.speed_weight"),
        (["reward.speed_weight=inf"], "reward.speed_weight"),
        (["reward.speed_clip=0"], "reward.speed_clip"),
        (["reward.speed_clip=-1"], "reward.speed_clip"),
        (["reward.speed_baseline="], "reward.speed_baseline"),
        (["reward.compile_error_reward=0.1"], "reward.compile_error_reward"),
        (["reward.runtime_error_reward=0.1"], "reward.runtime_error_reward"),
        (["reward.hack_reward=-0.4"], "reward.hack_reward"),
        (["reward.incorrect_reward=0.5"], "reward.incorrect_reward"),
        (["reward.speed_clip=2.0"], "reward.incorrect_reward"),
        (["reward.options.variant=fancy"], "reward.options.variant"),
        (["reward.options.global_momentum=1.0"], "reward.options.global_momentum"),
        (["reward.options.global_momentum=-0.1"], "reward.options.global_momentum"),
        (["reward.options.global_momemtum=0.5"], "reward.options"),
        # Design B's centred speed advantage spans 2 * lambda * clip: 1 - 2 * 0.6 < 0.
        (["reward.speed_weight=0.6", "reward.options.variant=decoupled"], "reward.incorrect_reward"),
    ],
)
def test_invalid_settings_name_the_key(overrides: list[str], key: str) -> None:
    """Refused when the config loads (a core rule or this plugin's check), naming the key."""
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        reward_section(*overrides)


def test_decoupled_bound_is_only_for_decoupled() -> None:
    settings = settings_from_config(reward_section("reward.speed_weight=0.6"))
    assert settings.variant is Variant.GROUP


def test_decoupled_accepts_defaults_at_its_bound() -> None:
    settings = settings_from_config(reward_section("reward.options.variant=decoupled"))
    assert settings.lowest_decoupled_correct_score == settings.incorrect_reward == 0.0


def test_error_is_a_config_error_and_a_value_error() -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_config(reward_section("reward.tau=2"))
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("field", ["tau", "speed_weight", "speed_clip", "incorrect_reward", "hack_reward"])
def test_non_numbers_are_rejected(field: str) -> None:
    config = dataclasses.replace(RewardConfig(), **{field: "0.5"})  # type: ignore[arg-type]  # a string on purpose
    with pytest.raises(RewardConfigError, match=rf"reward\.{field} must be a number"):
        settings_from_config(config)


def test_booleans_are_not_numbers() -> None:
    with pytest.raises(RewardConfigError, match=r"reward\.tau must be a number"):
        settings_from_config(RewardConfig(tau=True))


def test_options_must_be_a_mapping() -> None:
    with pytest.raises(RewardConfigError, match=r"reward\.options must be a mapping"):
        settings_from_config(RewardConfig(options=["group"]))  # type: ignore[arg-type]
