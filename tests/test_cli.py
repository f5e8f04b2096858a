"""The kz command line end to end, in a subprocess as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def kz(*args: str, check: bool = True, cwd=None) -> subprocess.CompletedProcess:
    completed = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", *args], capture_output=True, text=True, cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )
    if check and completed.returncode != 0:
        raise AssertionError(f"kz {' '.join(args)} failed ({completed.returncode}):\n{completed.stderr}")
    return completed


def test_help_lists_the_core_commands():
    out = kz("--help").stdout
    for command in ("plugins", "config", "problems"):
        assert command in out


def test_problems_list_examples():
    completed = kz("problems", "list")
    assert "1_vector_add" in completed.stdout
    assert "problems" in completed.stderr


def test_problems_list_json_and_filters():
    rows = [json.loads(line) for line in kz("problems", "list", "--json", "--name", "*sum*").stdout.splitlines()]
    assert [r["name"] for r in rows] == ["4_row_sum"]
    rows = [json.loads(line) for line in kz("problems", "list", "--json", "problems.ids=1-2").stdout.splitlines()]
    assert [r["problem_id"] for r in rows] == [1, 2]


def test_problems_list_kernelbench_level_1(kernelbench_jsonl):
    completed = kz("problems", "list", "--source", str(kernelbench_jsonl), "--level", "1", "--json")
    assert len(completed.stdout.splitlines()) == 100
    assert "100 problems" in completed.stderr


def test_problems_list_reports_a_broken_line_and_lists_the_rest(kernelbench_jsonl, tmp_path):
    lines = kernelbench_jsonl.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(lines[:3] + ["{not json"] + lines[3:]) + "\n")
    completed = kz("problems", "list", "--source", str(broken), "--level", "1", "--json")
    assert len(completed.stdout.splitlines()) == 100
    assert f"{broken}:4" in completed.stderr and "not valid JSON" in completed.stderr
    assert "1 malformed" in completed.stderr


def test_problems_show():
    completed = kz("problems", "show", "3_row_softmax")
    assert "torch.softmax" in completed.stdout
    missing = kz("problems", "show", "3_row_softmx", check=False)
    assert missing.returncode == 2
    assert "did you mean 3_row_softmax" in missing.stderr


def test_config_show_with_preset_and_overrides():
    out = kz("config", "show", "--preset", "kernelbench", "problems.level=1").stdout
    assert "source: hf:ScalingIntelligence/KernelBench" in out and "level: 1" in out
    data = json.loads(kz("config", "show", "--json", "run.seed=9").stdout)
    assert data["run"]["seed"] == 9
    assert "default" in kz("config", "show", "--presets").stdout.split()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("config", "show", "run.sed=1"), "run.sed"),
        (("config", "show", "--preset", "nope"), "unknown preset"),
        (("problems", "list", "--source", "/nonexistent/problems.jsonl"), "does not exist"),
        (("problems", "list", "--ids", "x"), "bad problem id list"),
    ],
)
def test_user_errors_are_one_clear_line_and_exit_2(args, message):
    completed = kz(*args, check=False)
    assert completed.returncode == 2
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr


def test_overrides_work_on_every_core_command():
    assert kz("problems", "list", "--json", "problems.name=matmul").stdout.count("\n") == 1
    assert kz("-q", "problems", "list", "run.seed=3").returncode == 0
