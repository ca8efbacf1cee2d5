"""A schedule's draw (docs/operators.md, "Seeded schedules and replay"):
what its seed draws on the host, and the code that injects it as constants.
`uneven` draws a length in [0, ns] for each value of one thread identity (a
warp, a lane or a CTA); `pct` draws a few change points (a CTA, a warp and a
step of the site) where one warp is held `ns`, as PCT lowers a thread's
priority at a few random points of a run. How the target spells a thread's
identity and a site's step is the catalog's ([target.schedule])."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from faults.schedules.table import Schedule, ScheduleFamily, ScheduleSpelling


@dataclass(frozen=True)
class Drawn:
    """What a seed drew: the lengths (uneven) or the change points (pct)."""

    schedule: Schedule
    ns: int
    lengths: tuple[int, ...] = ()
    points: tuple[tuple[int, int, int], ...] = ()  # (cta, warp, step), sorted

    def summary(self) -> str:
        """One line a report prints, the same for the same seed."""
        schedule = self.schedule
        if schedule.family is ScheduleFamily.UNEVEN:
            lengths = ", ".join(str(n) for n in self.lengths)
            return f"uneven seed {schedule.seed}: ns by {schedule.over} [{lengths}]"
        points = ", ".join(f"cta {c} warp {w} step {s}" for c, w, s in self.points)
        return f"pct seed {schedule.seed}: {self.ns} ns at {points}"


def draw(schedule: Schedule, ns: int) -> Drawn:
    """The schedule `schedule.seed` draws, with `random.Random(seed)`: Python
    keeps that generator's sequence for an int seed across versions."""
    rng = random.Random(schedule.seed)
    if schedule.family is ScheduleFamily.UNEVEN:
        return Drawn(schedule, ns, lengths=tuple(rng.randint(0, ns) for _ in range(schedule.count)))
    per_cta = schedule.warps * schedule.steps
    total = schedule.ctas * per_cta
    picked = sorted(rng.sample(range(total), min(schedule.changes, total)))
    points = tuple(
        (index // per_cta, index % per_cta // schedule.steps, index % schedule.steps)
        for index in picked
    )
    return Drawn(schedule, ns, points=points)


def scheduled_code(
    drawn: Drawn,
    spelling: ScheduleSpelling,
    site: str,
    when: str,
    marker: str,
    spin: Callable[[str], str],
) -> str:
    """`if (when [and a change point]) { spin; marker }`: the lengths as a
    constant table indexed by the identity (uneven), or the change points as a
    condition (pct). `spin(ns)`: the target's spin of `ns`, a C expression of
    nanoseconds (faults/pipeline/apply.py's, as every delay spins)."""
    schedule = drawn.schedule
    if schedule.family is ScheduleFamily.UNEVEN:
        table = ", ".join(f"{n}ull" for n in drawn.lengths)
        index = f"static_cast<unsigned>({spelling.identity(schedule.over)}) % {len(drawn.lengths)}u"
        body = (
            f"const unsigned long long afd_lengths[{len(drawn.lengths)}] = {{{table}}}; "
            f"const unsigned long long afd_ns = afd_lengths[{index}]; "
            + spin("afd_ns")
        )
        return f"if ({when}) {{ {body} {marker} }}"
    step = spelling.steps[site]
    points = " || ".join(
        f"(({spelling.cta}) == {c} && ({spelling.warp}) == {w} && ({step}) == {s})"
        for c, w, s in drawn.points
    )
    body = spin(f"{drawn.ns}ull")
    return f"if (({when}) && ({points})) {{ {body} {marker} }}"
