"""[target.schedule] and a delay patch's `schedule = {...}`, checked
(docs/architecture.md, "Seeded schedules and replay"). Apart from
faults/catalog_checks.py to keep each module to one table's worth of checks."""

from __future__ import annotations

from pathlib import Path

from faults.catalog_types import catalog_error
from faults.schedule import IDENTITIES, Schedule, ScheduleFamily, ScheduleSpelling

# The keys each family takes besides `family` and `seed`, with their bounds:
# an uneven table is a constant array of the injected code, kept small.
FAMILY_KEYS = {
    ScheduleFamily.UNEVEN: {"over": None, "count": 1024},
    ScheduleFamily.PCT: {"changes": 64, "ctas": 1 << 20, "warps": 1024, "steps": 1 << 20},
}


def schedule_spelling(path: Path, raw) -> ScheduleSpelling | None:
    """[target.schedule]: `warp`, `lane`, `cta` (C expressions) and an
    optional `step` table, site -> the step expression of that site."""
    if raw is None:
        return None
    where = "target.schedule"
    if not isinstance(raw, dict):
        raise catalog_error(path, where, f"a table, got {raw!r}")
    unknown = sorted(set(raw) - {*IDENTITIES, "step"})
    if unknown:
        raise catalog_error(path, where, f"unknown keys {unknown}; known: {[*IDENTITIES, 'step']}")
    for key in IDENTITIES:
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise catalog_error(path, where, f"{key}: a C expression, got {raw.get(key)!r}")
    steps = raw.get("step", {})
    if not isinstance(steps, dict):
        raise catalog_error(path, where, f"step: a table of site -> C expression, got {steps!r}")
    for site, expression in steps.items():
        if not isinstance(expression, str) or not expression.strip():
            raise catalog_error(path, where, f"step.{site}: a C expression, got {expression!r}")
    return ScheduleSpelling(raw["warp"], raw["lane"], raw["cta"], dict(steps))


def patch_schedule(path: Path, where: str, raw, site: str, spelling) -> Schedule:
    """A delay patch's `schedule`: a known family, an int seed >= 0, that
    family's keys (positive ints, `over` an identity); the target must spell
    the identities, and a pct schedule needs its site's step."""
    where = f"{where} schedule"
    if not isinstance(raw, dict):
        raise catalog_error(path, where, f"a table with a family, got {raw!r}")
    known = [str(f) for f in ScheduleFamily]
    try:
        family = ScheduleFamily(raw.get("family"))
    except ValueError:
        raise catalog_error(
            path, where, f"family: {raw.get('family')!r} is not one of {known}"
        ) from None
    unknown = sorted(set(raw) - {"family", "seed", *FAMILY_KEYS[family]})
    if unknown:
        raise catalog_error(path, where, f"{', '.join(unknown)}: a {family} schedule takes none")
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise catalog_error(path, where, f"seed: an int >= 0, got {seed!r}")
    values = {}
    for key, bound in FAMILY_KEYS[family].items():
        if key not in raw:
            continue
        value = raw[key]
        if key == "over":
            if value not in IDENTITIES:
                raise catalog_error(path, where, f"over: {value!r} is not one of {IDENTITIES}")
        elif not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= bound:
            raise catalog_error(path, where, f"{key}: an int in 1..{bound}, got {value!r}")
        values[key] = value
    if spelling is None:
        raise catalog_error(
            path, where, "the target has no [target.schedule] table spelling warp, lane and cta"
        )
    if family is ScheduleFamily.PCT and site not in spelling.steps:
        raise catalog_error(
            path, where, f"a pct schedule needs [target.schedule] step.{site!r}, the site's step"
        )
    return Schedule(family, seed, **values)
