"""Settings for every test of the repository (tests/ and each plugin's tests/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# No wall-clock limits that load can break: the suite runs beside other processes (and in
# parallel with itself, `make test`), where a 200 ms example can take 450.
settings.register_profile("kz", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kz")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files that hold a test marked ``slow`` first, each file's tests in their order:
    `make test` gives whole files to pytest-xdist's workers (``--dist loadfile``) in this
    order, and a long file handed out last would run alone at the end."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def suite_shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that every pytest-xdist worker of the run shares (the
    controller's base temporary folder; without xdist, the session's own): for what the
    suite makes once and many tests read. Whatever fills it must hold a file lock while
    it does (two workers may want the same thing at once) and must not change what a test
    finds there in a way another test can see."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "suite-shared"
    folder.mkdir(exist_ok=True)
    return folder
