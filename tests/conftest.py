"""Shared fixtures: test plugins registered for one test and unregistered after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kz_core.plugins import get_plugin_manager

REPO = Path(__file__).resolve().parents[1]
SHARED_KERNELBENCH = REPO.parent / "shared" / "datasets" / "kernelbench" / "problems.jsonl"


@pytest.fixture
def register_plugin():
    """Register plugin objects for the duration of one test: ``register_plugin(obj, "name")``."""
    pm = get_plugin_manager()
    added = []

    def register(plugin, name: str):
        pm.register(plugin, name=name)
        added.append(plugin)
        return plugin

    yield register
    for plugin in added:
        pm.unregister(plugin)


@pytest.fixture
def kernelbench_jsonl() -> Path:
    """KernelBench's problems.jsonl from ../shared (skips where it is absent)."""
    if not SHARED_KERNELBENCH.is_file():
        pytest.skip("../shared/datasets/kernelbench/problems.jsonl is not present")
    return SHARED_KERNELBENCH


def pytest_collection_modifyitems(config, items):
    """Tests marked ``triton`` evaluate Triton kernels: without kz-backend-triton (not
    installed, or left out by KZ_LOAD_PLUGINS) they skip, and the core's other tests run."""
    from kz_core.plugins import backends

    if "triton" in backends():
        return
    skip = pytest.mark.skip(reason="needs kz-backend-triton (these tests evaluate Triton kernels)")
    for item in items:
        if item.get_closest_marker("triton") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def install_plugin(tmp_path_factory):
    """Build and install a throwaway plugin distribution into a folder of its own, as a
    third party's would be: ``install_plugin(pyproject_text, {"module.py": source})`` gives
    the folder to put on ``PYTHONPATH`` (where kz, its workers included, find the entry point)."""
    import subprocess
    import sys
    import textwrap

    def install(pyproject: str, files: dict[str, str]):
        project = tmp_path_factory.mktemp("project")
        (project / "pyproject.toml").write_text(pyproject)
        for name, source in files.items():
            (project / name).write_text(textwrap.dedent(source))
        target = tmp_path_factory.mktemp("site")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "--target", str(target), str(project)],
            check=True, capture_output=True, text=True,
        )
        return target

    return install
