"""Structured config: defaults, presets, overrides, errors, and documented fields."""

from __future__ import annotations

import ast
import dataclasses
import inspect

import pytest

from kz_core import config as config_module
from kz_core.config import ConfigError, KzConfig, available_presets, load_config, to_container, to_yaml


def test_defaults_resolve_to_the_structured_config():
    config = load_config()
    assert to_container(config) == dataclasses.asdict(config_module.schema()())  # the core's and the plugins' keys
    core = dataclasses.asdict(KzConfig())
    assert all(to_container(config)[name] | value == to_container(config)[name] for name, value in core.items())
    assert config.problems.source == "examples"


def test_every_key_has_help_in_kz_config_show_plugins_keys_included():
    helps = config_module.config_help()
    assert helps["eval.device"].startswith("Device to evaluate on")
    assert helps["reward.tau"].startswith("CA-GRPO gate") and helps["reward.tau"].endswith("(reward_cagrpo)")
    missing = [f"{section}.{key}" for section, value in to_container(load_config()).items() for key in value if f"{section}.{key}" not in helps]
    assert not missing, f"keys without help: {missing}"
    text = to_yaml(load_config(), with_help=True)
    assert "  # CA-GRPO gate: speed counts once a group's correctness rate reaches tau [0..1]; 0: always" in text
    assert "ablate-reward. (reward_cagrpo)\n  tau: 0.5" in text


def test_choices_and_ranges_are_checked_when_the_config_loads():
    for override, message in (
        ("eval.tolerance=loose", "eval.tolerance='loose': use one of"),
        ("eval.timing_method=wallclock", "use one of graph, events"),
        ("eval.trials=0", "eval.trials=0: must be at least 1"),
        ("coevolve.rounds=-1", "coevolve.rounds=-1"),
        ("reward.speed_baseline=fastest", "use one of eager, compile"),
        ("reward.tau=2", "reward.tau must be in [0, 1]"),  # kz-reward-cagrpo's own check
    ):
        with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(").replace("[", r"\[")):
            load_config(None, [override])
    assert load_config(None, ["reward.name=other", "reward.tau=2"]).reward.tau == 2  # not CA-GRPO: its check stays out


def test_a_plugin_contributes_a_section_and_keys_with_help(register_plugin):
    from kz_core import ConfigSection, hookimpl

    @dataclasses.dataclass
    class CutlassKeys:
        # Tile size of the GEMM templates (a power of two).
        tile: int = 128

    def check(section):
        if section.tile & (section.tile - 1):
            raise ConfigError(f"cutlass.tile={section.tile}: use a power of two")

    class Cutlass:
        @hookimpl
        def register_config(self, register):
            register(ConfigSection(section="cutlass", fields=CutlassKeys, validate=check))

    register_plugin(Cutlass(), "cutlass")
    assert load_config(None, ["cutlass.tile=64"]).cutlass.tile == 64
    with pytest.raises(ConfigError, match="use a power of two"):
        load_config(None, ["cutlass.tile=100"])
    with pytest.raises(ConfigError, match="cutlass.tile"):
        load_config(None, ["cutlass.tile=big"])
    assert config_module.config_help()["cutlass.tile"] == "Tile size of the GEMM templates (a power of two). (cutlass)"

    @dataclasses.dataclass
    class Device:
        # The core's eval.device, defined again.
        device: str = "cpu"

    class Clash:
        @hookimpl
        def register_config(self, register):
            register(ConfigSection(section="eval", fields=Device))

    register_plugin(Clash(), "clash")
    with pytest.raises(ConfigError, match="eval.device is defined by both kz-core and plugin 'clash'"):
        load_config()


def test_overrides_are_typed_and_applied_last():
    config = load_config("kernelbench", ["problems.level=2", "run.seed=7", "problems.source=x.jsonl"])
    assert config.problems.level == 2 and isinstance(config.problems.level, int)
    assert config.run.seed == 7
    assert config.problems.source == "x.jsonl"  # the override beats the preset


def test_preset_changes_defaults():
    assert load_config("kernelbench").problems.source.startswith("hf:")
    assert to_container(load_config("default")) == to_container(load_config())


def test_preset_from_a_yaml_file(tmp_path):
    preset = tmp_path / "mine.yaml"
    preset.write_text("run:\n  seed: 11\n")
    assert load_config(str(preset)).run.seed == 11


@pytest.mark.parametrize(
    ("preset", "overrides", "message"),
    [
        ("nope", [], "unknown preset 'nope'"),
        (None, ["problems.levl=1"], "problems.levl"),
        (None, ["problems.level=abc"], "problems.level"),
        (None, ["justakey"], "not of the form key=value"),
    ],
)
def test_errors_name_what_to_fix(preset, overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_config(preset, overrides)


def test_bad_yaml_preset(tmp_path):
    preset = tmp_path / "bad.yaml"
    preset.write_text("- a list\n- not a mapping\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(str(preset))


def test_config_is_read_only():
    config = load_config()
    with pytest.raises(Exception):
        config.run.seed = 3


def test_every_shipped_preset_loads():
    assert "default" in available_presets()
    for name in available_presets():
        assert to_yaml(load_config(name))


def test_every_config_field_has_a_comment():
    """STYLE: each field carries a comment with its meaning, unit and default."""
    source = inspect.getsource(config_module)
    lines = source.splitlines()
    tree = ast.parse(source)
    undocumented = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("Config") and node.name != "KzConfig":
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign):
                    previous = lines[stmt.lineno - 2].strip()
                    if not previous.startswith("#"):
                        undocumented.append(f"{node.name}.{stmt.target.id}")
    assert not undocumented, f"config fields without a comment: {undocumented}"


def test_the_tolerance_table_names_are_the_evaluators():
    """config.py names the tables without importing the evaluator's correctness module
    (and torch with it) to check eval.tolerance."""
    from kz_core.evaluate.correctness import TOLERANCE_TABLES

    assert config_module.TOLERANCE_TABLE_NAMES == tuple(TOLERANCE_TABLES)
