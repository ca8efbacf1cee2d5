"""The catalog's [target.schedule] and a delay patch's `schedule = {...}`:
their types and their checks (docs/operators.md, "Seeded schedules and
replay"). The catalog reads them, so this module sits below it and says
what is wrong through the catalog's `fail(where, message)`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

# (where in the catalog, what is wrong) -> the error the catalog raises
Fail = Callable[[str, str], Exception]


class ScheduleFamily(str, Enum):
    PCT = "pct"
    UNEVEN = "uneven"

    def __str__(self) -> str:  # reports print the word
        return self.value


# The thread identities an uneven schedule may draw one length for each of.
IDENTITIES = ("warp", "lane", "cta")


@dataclass(frozen=True)
class ScheduleSpelling:
    """[target.schedule]: C expressions of this thread's warp (in its CTA), lane
    and CTA, and per site the step a pct change point names (an iteration of
    the loop around the site)."""

    warp: str
    lane: str
    cta: str
    steps: dict[str, str] = field(default_factory=dict)  # site -> its step expression

    def identity(self, name: str) -> str:
        return {"warp": self.warp, "lane": self.lane, "cta": self.cta}[name]


@dataclass(frozen=True)
class Schedule:
    """A delay patch's `schedule = {...}`: the family, the seed and the ranges
    its draw covers."""

    family: ScheduleFamily
    seed: int = 0
    over: str = "warp"  # uneven: the identity whose every value gets its own length
    count: int = 16  # uneven: lengths drawn (indexed by the identity modulo count)
    changes: int = 3  # pct: change points drawn (distinct)
    ctas: int = 1  # pct: the CTAs, warps and steps a change point is drawn from
    warps: int = 1
    steps: int = 1


# The keys each family takes besides `family` and `seed`, with their bounds:
# an uneven table is a constant array of the injected code, kept small.
FAMILY_KEYS = {
    ScheduleFamily.UNEVEN: {"over": None, "count": 1024},
    ScheduleFamily.PCT: {"changes": 64, "ctas": 1 << 20, "warps": 1024, "steps": 1 << 20},
}


def schedule_spelling(raw, fail: Fail) -> ScheduleSpelling | None:
    """[target.schedule]: `warp`, `lane`, `cta` (C expressions) and an
    optional `step` table, site -> the step expression of that site."""
    if raw is None:
        return None
    where = "target.schedule"
    if not isinstance(raw, dict):
        raise fail(where, f"a table, got {raw!r}")
    unknown = sorted(set(raw) - {*IDENTITIES, "step"})
    if unknown:
        raise fail(where, f"unknown keys {unknown}; known: {[*IDENTITIES, 'step']}")
    for key in IDENTITIES:
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise fail(where, f"{key}: a C expression, got {raw.get(key)!r}")
    steps = raw.get("step", {})
    if not isinstance(steps, dict):
        raise fail(where, f"step: a table of site -> C expression, got {steps!r}")
    for site, expression in steps.items():
        if not isinstance(expression, str) or not expression.strip():
            raise fail(where, f"step.{site}: a C expression, got {expression!r}")
    return ScheduleSpelling(raw["warp"], raw["lane"], raw["cta"], dict(steps))


def patch_schedule(where: str, raw, site: str, spelling, fail: Fail) -> Schedule:
    """A delay patch's `schedule`: a known family, an int seed >= 0, that
    family's keys (positive ints, `over` an identity); the target must spell
    the identities, and a pct schedule needs its site's step."""
    where = f"{where} schedule"
    if not isinstance(raw, dict):
        raise fail(where, f"a table with a family, got {raw!r}")
    known = [str(f) for f in ScheduleFamily]
    try:
        family = ScheduleFamily(raw.get("family"))
    except ValueError:
        raise fail(where, f"family: {raw.get('family')!r} is not one of {known}") from None
    unknown = sorted(set(raw) - {"family", "seed", *FAMILY_KEYS[family]})
    if unknown:
        raise fail(where, f"{', '.join(unknown)}: a {family} schedule takes none")
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise fail(where, f"seed: an int >= 0, got {seed!r}")
    values = {}
    for key, bound in FAMILY_KEYS[family].items():
        if key not in raw:
            continue
        value = raw[key]
        if key == "over":
            if value not in IDENTITIES:
                raise fail(where, f"over: {value!r} is not one of {IDENTITIES}")
        elif not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= bound:
            raise fail(where, f"{key}: an int in 1..{bound}, got {value!r}")
        values[key] = value
    if spelling is None:
        raise fail(where, "the target has no [target.schedule] table spelling warp, lane and cta")
    if family is ScheduleFamily.PCT and site not in spelling.steps:
        raise fail(where, f"a pct schedule needs [target.schedule] step.{site!r}, the site's step")
    return Schedule(family, seed, **values)
