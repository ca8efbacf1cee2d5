"""The litmus on one GPU (`pytest -m gpu`, docs/operators.md,
"Amplification"): the control (release.sys / acquire.sys) shows no weak
outcome with and without memory stress, and a relaxed publish runs to a
numeric rate over real observations."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.amplify.device import Budget, Stress, device_geometry, run_shape
from faults.amplify.shapes import Publish, Shape, Wait
from invariants.sync.sites import Group

pytestmark = pytest.mark.gpu(1)

SOURCES = Path(__file__).parents[2] / "afdep" / "csrc"
BUDGET = Budget(launches=50, iterations=128, spin_limit=20000, seconds=20.0)
STRESS = (Stress.NONE, Stress.MEMORY)


@pytest.mark.parametrize("stress", STRESS)
@pytest.mark.parametrize("groups", [(Group.BLOCK, Group.BLOCK), (Group.WARP, Group.WARP)])
def test_the_control_shows_no_weak_outcome(stress, groups):
    control = Shape(producers=groups[0], consumers=groups[1])
    geometry = device_geometry(control, SOURCES, None, STRESS)
    result = run_shape(control, stress, geometry, BUDGET, SOURCES, seed=1)
    assert result.launches == 50
    assert result.weak == 0
    assert result.observed + result.missed == 50 * 128 * geometry.pairs
    assert result.observed > 0


@pytest.mark.parametrize("wait", [Wait.ACQUIRE_SYS, Wait.RELAXED_SYS])
def test_a_weakened_litmus_runs_to_a_numeric_rate(wait):
    shape = Shape(
        publish=Publish.RELAXED_SYS, wait=wait, producers=Group.WARP, consumers=Group.WARP
    )
    geometry = device_geometry(shape, SOURCES, None, STRESS)
    result = run_shape(shape, Stress.MEMORY, geometry, BUDGET, SOURCES, seed=2)
    assert result.observed > 0
    rate = result.weak / result.observed
    assert 0.0 <= rate <= 1.0


@pytest.mark.gpu(2)
def test_across_two_gpus_the_control_is_clean_and_a_narrowed_scope_measured():
    control = Shape(producers=Group.WARP, consumers=Group.WARP, across_gpus=True)
    narrowed = Shape(Publish.RELEASE_GPU, Wait.ACQUIRE_GPU, Group.WARP, True, Group.WARP, True)
    geometry = device_geometry(control, SOURCES, None, STRESS)
    clean = run_shape(control, Stress.MEMORY, geometry, BUDGET, SOURCES, seed=3)
    assert (clean.launches, clean.weak) == (50, 0)
    assert clean.observed > 0
    measured = run_shape(narrowed, Stress.NVLINK, geometry, BUDGET, SOURCES, seed=4)
    assert measured.observed + measured.missed == 50 * 128 * geometry.pairs
