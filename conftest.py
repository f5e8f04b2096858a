"""Settings for every test of the repository (tests/ and each plugin's tests/)."""

from __future__ import annotations

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
