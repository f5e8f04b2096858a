"""The plugin manager: defaults, entry points, KZ_LOAD_PLUGINS, conflicts, bad hookimpls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pluggy
import pytest

from kz_core import hookimpl
from kz_core.model import BackendInfo
from kz_core.plugins import (
    DEFAULT_PLUGINS,
    PluginError,
    backends,
    check_pending,
    get_plugin_manager,
    get_plugins,
    problem_sources,
)

EXPECTED_PLUGINS = {"backend_triton", "backend_cuda", "policy_hf", "reward_cagrpo"}


def kz_json(*args: str, env: dict | None = None) -> list[dict]:
    completed = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", *args, "--json"],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, check=True,
    )
    return json.loads(completed.stdout)


@pytest.mark.triton
def test_defaults_and_installed_plugins_are_registered():
    names = {p.name for p in get_plugins()}
    assert set(DEFAULT_PLUGINS) <= names
    assert EXPECTED_PLUGINS <= names
    assert {"triton", "cuda", "cuda_inline"} <= set(backends())
    assert {"examples", "hf", "jsonl", "directory"} <= set(problem_sources())


def test_loading_is_idempotent():
    before = len(get_plugin_manager().list_name_plugin())
    from kz_core.plugins import load_plugins

    load_plugins()
    load_plugins()
    assert len(get_plugin_manager().list_name_plugin()) == before


@pytest.mark.triton
def test_kz_plugins_lists_the_four_plugins_with_versions_and_hooks():
    rows = {row["name"]: row for row in kz_json("plugins")}
    assert EXPECTED_PLUGINS <= set(rows)
    assert rows["backend_triton"]["version"] == "0.1.0"
    assert rows["backend_triton"]["distribution"] == "kz-backend-triton"
    assert "register_backends" in rows["backend_triton"]["hooks"]
    assert "backends: triton" in rows["backend_triton"]["provides"]
    assert "shape_rewards" in rows["reward_cagrpo"]["hooks"]


def test_kz_load_plugins_restricts_installed_plugins():
    rows = {row["name"] for row in kz_json("plugins", "--all", env={"KZ_LOAD_PLUGINS": "kz-backend-triton"})}
    assert "backend_triton" in rows and "backend_cuda" not in rows
    assert set(DEFAULT_PLUGINS) <= rows  # the core's defaults always load
    rows = {row["name"] for row in kz_json("plugins", env={"KZ_LOAD_PLUGINS": ""})}
    assert rows == set()


@pytest.mark.triton
def test_duplicate_backend_names_are_rejected_naming_both_plugins(register_plugin):
    class Impostor:
        @hookimpl
        def register_backends(self, register):
            register(BackendInfo(name="triton", language="triton"))

    register_plugin(Impostor(), "impostor")
    with pytest.raises(PluginError, match=r"'triton' is registered twice: by plugin 'backend_triton' and by plugin 'impostor'"):
        backends()


def test_a_misspelt_hookimpl_fails_loudly(register_plugin):
    class Misspelt:
        @hookimpl
        def register_backend(self, register):  # missing the final s
            pass

    register_plugin(Misspelt(), "misspelt")
    with pytest.raises(PluginError, match="misspelt"):
        check_pending()


def test_hookimpl_with_unknown_argument_is_refused():
    pm = get_plugin_manager()

    class WrongArgs:
        @hookimpl
        def static_checks(self, candidate, colour):
            return []

    with pytest.raises(pluggy.PluginValidationError):
        pm.register(WrongArgs(), name="wrong-args")


@pytest.mark.triton
def test_a_broken_entry_point_is_skipped_with_a_message(tmp_path):
    site = tmp_path / "site"
    dist = site / "kz_broken-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kz-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[kz]\nbroken = kz_broken_module\n")
    (site / "kz_broken_module.py").write_text("raise RuntimeError('this plugin is broken')\n")
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    completed = subprocess.run(
        [sys.executable, "-m", "kz_core.cli", "plugins"], capture_output=True, text=True, env=env
    )
    assert completed.returncode == 0, completed.stderr
    assert "plugin 'broken' (kz-broken) failed to import" in completed.stderr
    assert "this plugin is broken" in completed.stderr
    assert "backend_triton" in completed.stdout


def test_backend_hooks_are_called_on_the_plugin_that_registered_the_backend(register_plugin, tmp_path):
    """A backend plugin that forgets to check ``candidate.backend`` cannot take another
    backend's candidates: kz calls backend hooks on the backend's own plugin only."""
    from kz_core import CompileFailure
    from kz_core.model import Candidate, Verdict
    from kz_core.plugins import backend_hook

    class Greedy:
        @hookimpl
        def register_backends(self, register):
            register(BackendInfo(name="greedy", language="python", description="answers everything"))

        @hookimpl
        def backend_compile(self, candidate):
            return CompileFailure(message=f"greedy took {candidate.backend}", verdict=Verdict.COMPILE_ERROR)

    register_plugin(Greedy(), "greedy")
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    for backend in ("triton", "greedy"):
        result = backend_hook("backend_compile", backend)(candidate=Candidate("p", backend, code), device="cpu", workdir=tmp_path)
        took = isinstance(result, CompileFailure) and result.message.startswith("greedy took")
        assert took is (backend == "greedy"), (backend, result)
    assert backend_hook("backend_compile", "nobody")(candidate=Candidate("p", "nobody", code), device="cpu", workdir=tmp_path) is None


@pytest.mark.triton
def test_a_backends_registration_carries_its_prompt_guide_environment_versions_and_preload(register_plugin):
    """What the core used to hard-code by backend name comes from the registration: the
    core names no backend."""
    from kz_core.config import PolicyConfig
    from kz_core.evaluate.sandbox import device_environment
    from kz_core.evaluate.worker import _backend_versions
    from kz_core.model import Problem
    from kz_core.prompts import coder_prompt

    class Cutlass:
        @hookimpl
        def register_backends(self, register):
            register(
                BackendInfo(
                    name="cutlass",
                    language="cuda",
                    description="CUTLASS templates",
                    prompt_guide="Write the kernels as CUTLASS GEMM templates.",
                    versions=("pluggy",),
                    cpu_environment={"CUTLASS_ON_CPU": "1"},
                    preload=("json",),
                )
            )

    register_plugin(Cutlass(), "cutlass")
    info = backends()["cutlass"]
    assert info.cpu_environment == (("CUTLASS_ON_CPU", "1"),) and info.preload == ("json",)
    problem = Problem("p", "import torch\nclass Model(torch.nn.Module):\n    pass\n")
    prompt = coder_prompt(problem, "cutlass", PolicyConfig(one_shot=False))
    assert prompt.messages[-1].content.startswith("Write the kernels as CUTLASS GEMM templates.")
    assert coder_prompt(problem, "triton", PolicyConfig(one_shot=False)).messages[-1].content.startswith("Write the kernels in Triton")
    assert f"pluggy {pluggy.__version__}" in _backend_versions()
    environment = device_environment("cpu")
    assert environment["CUTLASS_ON_CPU"] == "1" and environment["TRITON_INTERPRET"] == "1" and environment["CUDA_VISIBLE_DEVICES"] == ""
    assert device_environment("cuda:0") == {}


def test_the_cores_tests_run_without_the_triton_backend(tmp_path):
    """Tests that evaluate Triton kernels carry the `triton` marker and skip when
    kz-backend-triton is not loaded; the rest of the core's tests pass without it."""
    tests = [str(Path(__file__).parent / "test_rundir.py"), str(Path(__file__).parent / "test_config.py")]
    env = {**os.environ, "KZ_LOAD_PLUGINS": "backend_cuda,policy_hf,reward_cagrpo"}
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *tests], capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert "1 skipped" in completed.stdout and "needs kz-backend-triton" in completed.stdout
