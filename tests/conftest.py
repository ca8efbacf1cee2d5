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

GPUS_NEEDED = 2  # `@pytest.mark.gpu`; `@pytest.mark.gpu(1)` needs one


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [(item, item.get_closest_marker("gpu")) for item in items]
    marked = [
        (item, marker.args[0] if marker.args else GPUS_NEEDED) for item, marker in marked if marker
    ]
    if not marked:
        return
    found = gpu_count()
    for item, needed in marked:
        if found < needed:
            item.add_marker(pytest.mark.skip(reason=f"needs {needed} GPUs (found {found})"))
