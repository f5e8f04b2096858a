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
    assert to_container(config) == dataclasses.asdict(KzConfig())
    assert config.problems.source == "examples"


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
