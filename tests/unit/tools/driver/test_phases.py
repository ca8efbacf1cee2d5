"""The driver's phase clock: seconds summed per phase, in Phase order."""

import itertools

import pytest

from tools.driver import phases
from tools.driver.phases import Phase, PhaseClock


def test_phases_sum_and_keep_their_order(monkeypatch):
    ticks = itertools.count()
    monkeypatch.setattr(phases.time, "perf_counter", lambda: float(next(ticks)))
    clock = PhaseClock()
    with clock.timed(Phase.CHECKS):  # 0 -> 1
        pass
    with clock.timed(Phase.STEPS):  # 2 -> 3
        pass
    with clock.timed(Phase.CHECKS):  # 4 -> 5
        pass
    assert clock.as_dict() == {"steps": 1.0, "checks": 2.0}


def test_a_phase_that_raised_still_counts(monkeypatch):
    ticks = iter([10.0, 12.5])
    monkeypatch.setattr(phases.time, "perf_counter", lambda: next(ticks))
    clock = PhaseClock()
    with pytest.raises(RuntimeError), clock.timed(Phase.BUFFERS):
        raise RuntimeError("a rank's construction failed")
    assert clock.as_dict() == {"buffers": 2.5}
