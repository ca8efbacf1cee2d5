"""hostio.machine's share of the CPU for runs started several at a time."""

from __future__ import annotations

import pytest

from hostio import cpu_share


@pytest.mark.parametrize(
    ("cores", "at_once", "threads"),
    [(16, 8, "2"), (16, 1, "16"), (16, 12, "1"), (16, 32, "1"), (2, 0, "2"), (None, 4, "1")],
)
def test_each_run_gets_its_share_of_the_cores(monkeypatch, cores, at_once, threads):
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    assert cpu_share(at_once) == {"OMP_NUM_THREADS": threads}


def test_a_knob_the_caller_or_the_catalog_sets_is_left_as_set(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert cpu_share(8, {"OMP_NUM_THREADS": "4"}, {}) == {}
    assert cpu_share(8, {"PATH": "/bin"}, {"OMP_NUM_THREADS": "1"}) == {}
    assert cpu_share(8, {"PATH": "/bin"}, {"AFDEP_TIMEOUT_MS": "3000"}) == {"OMP_NUM_THREADS": "2"}
