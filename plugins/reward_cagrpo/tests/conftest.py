"""Shared fixtures: every test starts with the plugin's gate state forgotten."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kz_reward_cagrpo import plugin


@pytest.fixture(autouse=True)
def fresh_gate_state() -> Iterator[None]:
    plugin.reset_state()
    yield
    plugin.reset_state()
