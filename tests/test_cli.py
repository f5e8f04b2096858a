"""The kz command line end to end, in a subprocess as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE_CANDIDATES = str(Path(__file__).resolve().parents[1] / "examples" / "candidates" / "triton")


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
        (("eval", "-c", "/nonexistent/candidates.jsonl"), "do not exist"),
        pytest.param(("eval", "-c", EXAMPLE_CANDIDATES, "problems.ids=x"), "bad problem id list", marks=pytest.mark.triton),
        (("eval", "-c", EXAMPLE_CANDIDATES, "eval.tolerance=loose"), "eval.tolerance='loose'"),
        (("propose", "--n", "1", "proposer.min_apis=3", "proposer.max_apis=2", "policy.model=embedded:tiny"), "min_apis"),
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


def test_every_user_facing_error_is_a_kz_error():
    """One family: the CLI catches KzError once; these are the errors a user can fix."""
    from kz_core import HookUserError, KzError
    from kz_core.candidates import CandidateSourceError
    from kz_core.cli import KzUsageError
    from kz_core.coevolve import CoevolveError
    from kz_core.config import ConfigError
    from kz_core.evaluate import EvaluatorError
    from kz_core.generate import PolicyUnavailableError
    from kz_core.plugins import PluginError
    from kz_core.problems.base import ProblemSourceError

    for error in (HookUserError, CandidateSourceError, KzUsageError, CoevolveError, ConfigError, EvaluatorError, PolicyUnavailableError, PluginError, ProblemSourceError):
        assert issubclass(error, KzError), error


def run_plugin_command(tmp_path, name: str, source: str, argv: list[str]) -> subprocess.CompletedProcess:
    """Register module ``name`` (``source``) as a plugin and run ``kz`` with ``argv`` in a
    fresh process, through the console script's entry point (``kz_core.cli.main``)."""
    (tmp_path / f"{name}.py").write_text(source)
    script = (
        f"import {name}\n"
        "from kz_core.plugins import get_plugin_manager\n"
        f"get_plugin_manager().register({name}, {name!r})\n"
        "from kz_core.cli import main\n"
        f"main({argv!r})\n"
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})


def test_a_plugin_commands_kz_error_is_one_line_and_its_exit_status(tmp_path):
    """A plugin's command raising its own KzError subclass needs no try/except of its own."""
    source = (
        "import click\n"
        "from kz_core import KzError, hookimpl\n"
        "class QuotaError(KzError):\n"
        "    exit_code = 3\n"
        "@hookimpl\n"
        "def register_commands(cli):\n"
        "    @cli.command(name='boom')\n"
        "    def boom():\n"
        "        raise QuotaError('the quota is spent: wait an hour')\n"
    )
    completed = run_plugin_command(tmp_path, "kz_errplugin", source, ["boom"])
    assert completed.returncode == 3, completed.stderr
    assert completed.stderr.strip().splitlines()[-1] == "kz: the quota is spent: wait an hour"
    assert "Traceback" not in completed.stderr


def test_ctrl_c_says_what_was_kept_and_exits_130(tmp_path):
    source = (
        "from kz_core import hookimpl\n"
        "@hookimpl\n"
        "def register_commands(cli):\n"
        "    @cli.command(name='long')\n"
        "    def long():\n"
        "        raise KeyboardInterrupt\n"
    )
    completed = run_plugin_command(tmp_path, "kz_ctrlc", source, ["long"])
    assert completed.returncode == 130, completed.stderr
    assert completed.stderr.startswith("kz: interrupted") and "run the same command again to resume" in completed.stderr
    assert "Aborted!" not in completed.stderr and "Traceback" not in completed.stderr


def test_train_without_the_plugin_that_provides_coder_says_which_to_install(tmp_path):
    env = {**os.environ, "KZ_LOAD_PLUGINS": "backend_triton"}
    completed = subprocess.run([sys.executable, "-m", "kz_core.cli", "train", "coder"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert completed.returncode == 2, completed.stderr
    assert "no command `kz train coder`" in completed.stderr and "kz-policy-hf" in completed.stderr
    assert not (tmp_path / "runs").exists()


def test_tables_piped_to_a_file_keep_their_headers(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    completed = subprocess.run([sys.executable, "-m", "kz_core.cli", "plugins"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert completed.returncode == 0, completed.stderr
    # At 80 columns these cells were folded and the headers cut ("provi…").
    assert "backend_compile, backend_kernels, backend_run, register_backends, static_checks" in completed.stdout
    assert "provides" in completed.stdout and "backends: cuda, cuda_inline" in completed.stdout
