"""The seeded launch skew: a pure function of the seed, every order within a
few steps, and the driver's log line for it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from afdep.vocab import parse_log
from tools.driver.skew import (
    MAX_DELAY_CYCLES,
    MIN_DELAY_CYCLES,
    LaunchSkew,
    delay_stream,
    launch_delay,
    launch_delays,
    step_kind,
)


def test_the_schedule_of_seed_0_on_two_ranks():
    """The catalog's run (two ranks, six steps, seed 0): the attention rank
    first, the FFN rank first, no skew, twice over."""
    schedule = [launch_delays(0, step, 2) for step in range(6)]
    assert schedule == [
        (0, 22081),
        (62676, 0),
        (0, 0),
        (0, 17545),
        (97764, 0),
        (0, 0),
    ]


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another():
    first = [launch_delays(7, step, 4) for step in range(20)]
    assert first == [launch_delays(7, step, 4) for step in range(20)]
    assert first != [launch_delays(8, step, 4) for step in range(20)]


@pytest.mark.parametrize("world_size", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_each_block_of_steps_has_every_kind_and_distinct_schedules(seed, world_size):
    block = world_size + 1
    for start in range(0, 4 * block, block):
        steps = range(start, start + block)
        kinds = [step_kind(seed, step, world_size) for step in steps]
        assert sorted(kinds, key=lambda kind: -1 if kind is None else kind) == [
            None,
            *range(world_size),
        ]
        schedules = [launch_delays(seed, step, world_size) for step in steps]
        assert len(set(schedules)) == block  # different steps differ


def test_one_rank_alone_is_never_delayed():
    assert {launch_delays(5, step, 1) for step in range(10)} == {(0,)}


@pytest.mark.parametrize("step", range(12))
def test_the_first_rank_starts_at_once_and_the_others_within_the_range(step):
    delays = launch_delays(3, step, 3)
    first = step_kind(3, step, 3)
    if first is None:
        assert delays == (0, 0, 0)
        return
    assert delays[first] == 0
    late = [d for rank, d in enumerate(delays) if rank != first]
    assert all(MIN_DELAY_CYCLES <= d <= MAX_DELAY_CYCLES for d in late), delays


def test_bad_world_sizes_and_delays_are_refused():
    with pytest.raises(ValueError) as info:
        step_kind(0, 0, 0)
    assert str(info.value) == "world_size must be at least 1, got 0"
    with pytest.raises(ValueError) as info:
        delay_stream(-1)
    assert str(info.value) == "cycles must be >= 0, got -1"
    delay_stream(0)  # no kernel, so no GPU needed


def test_the_driver_logs_one_line_per_step_and_rank(capsys):
    seeded = SimpleNamespace(skew=LaunchSkew.SEEDED, skew_seed=0)
    off = SimpleNamespace(skew=LaunchSkew.OFF, skew_seed=None)
    got = [launch_delay(seeded, step, rank, 2) for step in range(3) for rank in range(2)]
    assert got == [0, 22081, 62676, 0, 0, 0]
    assert [launch_delay(off, 1, rank, 2) for rank in range(2)] == [0, 0]
    log = "".join(f"[default0]:{line}\n" for line in capsys.readouterr().out.splitlines())
    assert parse_log(log).skews == [
        (0, 0, 0),
        (0, 1, 22081),
        (1, 0, 62676),
        (1, 1, 0),
        (2, 0, 0),
        (2, 1, 0),
        (1, 0, 0),
        (1, 1, 0),
    ]
