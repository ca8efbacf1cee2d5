"""A schedule's draw (docs/operators.md, "Seeded schedules and replay"): the
same seed, the same lengths or change points."""

from __future__ import annotations

from faults.schedules.draw import draw
from faults.schedules.table import Schedule, ScheduleFamily


def test_an_uneven_draw_is_the_seeds_lengths():
    drawn = draw(Schedule(ScheduleFamily.UNEVEN, seed=7, count=4), 1000)
    assert drawn.lengths == (331, 970, 154, 404)
    assert drawn.summary() == "uneven seed 7: ns by warp [331, 970, 154, 404]"


def test_a_pct_draw_is_the_seeds_change_points():
    schedule = Schedule(ScheduleFamily.PCT, seed=7, changes=3, ctas=24, warps=16, steps=2)
    drawn = draw(schedule, 200_000)
    assert drawn.points == ((4, 13, 0), (10, 5, 1), (12, 10, 0))
    assert drawn.summary() == (
        "pct seed 7: 200000 ns at cta 4 warp 13 step 0, cta 10 warp 5 step 1, cta 12 warp 10 step 0"
    )
    assert draw(schedule, 200_000) == drawn  # the same seed, the same draw
    other = draw(Schedule(ScheduleFamily.PCT, seed=8, changes=3, ctas=24, warps=16), 1)
    assert other.points != drawn.points


def test_pct_draws_distinct_points_and_no_more_than_there_are():
    drawn = draw(Schedule(ScheduleFamily.PCT, seed=1, changes=9, ctas=2, warps=2, steps=1), 5)
    assert drawn.points == ((0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0))
