"""Markers, hardware gating and Hypothesis profiles for the whole suite."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from hostio import gpu_count

settings.register_profile(
    "ci", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "nightly", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

GPUS_NEEDED = 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    found = gpu_count()
    if found >= GPUS_NEEDED:
        return
    skip = pytest.mark.skip(reason=f"needs {GPUS_NEEDED} GPUs (found {found})")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
