"""The ttrl tests' fixtures (their helpers: ttrl_helpers.py)."""

from __future__ import annotations

import pytest
from ttrl_helpers import FakeClock, make_leak_task

from arc_trl.data.task import ArcTask


@pytest.fixture
def leak_task() -> ArcTask:
    return make_leak_task()


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()
