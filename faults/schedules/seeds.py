"""A catalog's scheduled faults over seeds (docs/operators.md, "Seeded
schedules and replay"): a fault whose delay has a schedule runs, in a sweep
with `--seeds K`, once per seed as its own fault `<fault>~s<seed>` (its own
tree), and says what its seed drew."""

from __future__ import annotations

from dataclasses import replace

from faults.catalog import Catalog, CatalogError
from faults.schedules.draw import draw
from faults.schedules.ids import seeded_id


def is_scheduled(catalog: Catalog, fault_id: str) -> bool:
    return any(p.schedule is not None for p in catalog.all_patches(fault_id))


def with_seed(catalog: Catalog, fault_id: str, seed: int) -> Catalog:
    """`catalog` with `<fault_id>~s<seed>`: the fault with every schedule of its
    own patches drawn from `seed`, its markers its own; a scheduled include is
    seeded alike. The same seed gives the same patch text, so the same tree."""
    fault = catalog.fault(fault_id)
    label = seeded_id(fault_id, seed)
    if label in catalog.faults:
        return catalog
    includes = []
    for included in fault.includes:
        if is_scheduled(catalog, included):
            catalog = with_seed(catalog, included, seed)
            included = seeded_id(included, seed)
        includes.append(included)
    patches = tuple(
        replace(p, owner=label, schedule=p.schedule and replace(p.schedule, seed=seed))
        for p in fault.patches
    )
    seeded = replace(fault, id=label, patches=patches, includes=tuple(includes))
    return replace(catalog, faults={**catalog.faults, label: seeded})


def with_seeds(
    catalog: Catalog, fault_ids: list[str], seeds: tuple[int, ...]
) -> tuple[Catalog, list[str]]:
    """Each scheduled fault of `fault_ids` replaced by its seeded faults over `seeds`
    (no seeds: the faults as they are); a CatalogError when none is scheduled."""
    if not seeds:
        return catalog, fault_ids
    if not any(is_scheduled(catalog, f) for f in fault_ids):
        raise CatalogError(f"--seeds {len(seeds)}: no chosen fault has a scheduled delay")
    expanded = []
    for fault_id in fault_ids:
        if not is_scheduled(catalog, fault_id):
            expanded.append(fault_id)
            continue
        for seed in seeds:
            catalog = with_seed(catalog, fault_id, seed)
            expanded.append(seeded_id(fault_id, seed))
    return catalog, expanded


def describe(catalog: Catalog, label: str) -> tuple[int | None, str]:
    """(seed, what it drew) of the fault `label` ((None, "") for a control or an
    unscheduled fault): one `<site> <summary>` per scheduled patch."""
    if label not in catalog.faults:
        return None, ""
    scheduled = [p for p in catalog.all_patches(label) if p.schedule is not None]
    if not scheduled:
        return None, ""
    text = "; ".join(f"{p.site} {draw(p.schedule, p.ns).summary()}" for p in scheduled)
    return scheduled[0].schedule.seed, text


def schedule_family(catalog: Catalog, fault_id: str) -> str | None:
    """The family of the fault's first scheduled patch (None: not scheduled)."""
    found = [p.schedule for p in catalog.all_patches(fault_id) if p.schedule is not None]
    return str(found[0].family) if found else None
