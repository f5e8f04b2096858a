"""A third party's plugin, built and installed as its own distribution, extends kz.

The test writes a throwaway project (``kz-backend-demo``) whose entry point in group ``kz``
registers a new backend and a static check, installs it with pip into a folder of its own,
and runs ``kz plugins`` with that folder on the path: kz finds it without any change here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "kz-backend-demo"
version = "0.3.1"
dependencies = []

[project.entry-points.kz]
backend_demo = "kz_backend_demo"
"""

MODULE = '''
"""A demo backend registered by a third party."""
from kz_core import BackendInfo, Finding, hookimpl


@hookimpl
def register_backends(register):
    register(BackendInfo(name="demo_cutlass", language="cutlass", description="third-party demo"))


@hookimpl
def static_checks(candidate):
    if candidate.backend != "demo_cutlass":
        return []
    return [Finding(check="demo_check", message="seen by the demo plugin")]
'''


@pytest.fixture(scope="module")
def installed_demo(install_plugin):
    target = install_plugin(PYPROJECT, {"kz_backend_demo.py": MODULE})
    assert any(p.name.startswith("kz_backend_demo-0.3.1") for p in target.iterdir())
    return target


def run_with(site, *args):
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "kz_core.cli", *args], capture_output=True, text=True, env=env, check=True)


@pytest.mark.triton
def test_kz_plugins_shows_the_third_party_plugin_and_its_hooks(installed_demo):
    rows = {row["name"]: row for row in json.loads(run_with(installed_demo, "plugins", "--json").stdout)}
    demo = rows["backend_demo"]
    assert demo["version"] == "0.3.1"
    assert demo["distribution"] == "kz-backend-demo"
    assert demo["hooks"] == ["register_backends", "static_checks"]
    assert demo["provides"] == ["backends: demo_cutlass"]
    # The four first-party plugins are still there beside it.
    assert {"backend_triton", "backend_cuda", "policy_hf", "reward_cagrpo"} <= set(rows)


@pytest.mark.triton
def test_the_table_shows_it_too(installed_demo):
    assert "backend_demo" in run_with(installed_demo, "plugins").stdout


@pytest.mark.triton
def test_its_hooks_are_called(installed_demo):
    script = (
        "from kz_core import Candidate, get_plugin_manager\n"
        "from kz_core.plugins import backends\n"
        "print(sorted(backends()))\n"
        "findings = get_plugin_manager().hook.static_checks(candidate=Candidate('p', 'demo_cutlass', 'x = 1'), problem=None)\n"
        "print([f.check for group in findings for f in group])\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{installed_demo}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    assert "'demo_cutlass'" in out
    assert "demo_check" in out
