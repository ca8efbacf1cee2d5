"""Delays that expose a missing barrier instead of hiding it
(docs/operators.md, "Delays that expose"). For every release site whose
producers are more than its publishing thread, two must-pass faults:

- `gen.uneven-delay.<release>`: the other producers (the other lanes of a
  warp, the other warps of a CTA, the other CTAs: never the publisher) are
  delayed at the start of the store site the release publishes;
- `gen.forced-order.<release>`: those producers wait there, bounded, for a
  marker cell the publisher bumps right after its release, so without the
  barrier the flag is out before their data every time, and with it the
  wait only costs its bound.

Both pass on correct code. Who publishes and who is held is the catalog's
(`[target.publisher]`); the cell's code is apply's, by the target's language.
"""

from __future__ import annotations

from faults.catalog import Catalog, CatalogError, Fault, GenerateSettings, Patch
from faults.catalog.model import Holding, Publisher
from faults.operators import Family
from invariants.sync.sites import Site, published_store

UNEVEN_PREFIX = "gen.uneven-delay."
FORCED_PREFIX = "gen.forced-order."


def producers_of(site: Site) -> str | None:
    """The release's producers= group as a string ("warp"), or None when the
    site declares none (a str-valued enum or a plain string both read here)."""
    group = getattr(site, "producers", None)
    return getattr(group, "value", group)


def _uneven_delay(
    release: Site, store: Site, group: str, holding: Holding, settings: GenerateSettings
) -> Fault:
    fault_id = UNEVEN_PREFIX + release.name
    patch = settings.held_back(fault_id, store.name, holding.held, marker=holding.marker)
    return Fault(
        fault_id,
        f"delay {store.name} in the {group}'s producers other than the publisher of "
        f"{release.name} ({holding.held}): a missing {group} barrier lets the flag out first",
        "pass",
        (patch,),
        configs=settings.configs_for_site(release.name),
        family=Family.UNEVEN_DELAY,
    )


def _forced_order(
    release: Site,
    store: Site,
    group: str,
    holding: Holding,
    publisher: Publisher,
    settings: GenerateSettings,
) -> Fault:
    fault_id = FORCED_PREFIX + release.name
    cell = holding.cell or "0"  # expose_faults makes none for a group without a cell
    patches = (
        Patch(
            fault_id,
            site=store.name,
            action="hold",
            ns=publisher.hold_ns,
            when=settings.narrowed(holding.held),
            marker=holding.marker,
            cell=cell,
        ),
        Patch(fault_id, site=release.name, action="signal", when=holding.publisher, cell=cell),
    )
    return Fault(
        fault_id,
        f"the {group}'s producers other than the publisher of {release.name} wait at "
        f"{store.name} (at most {publisher.hold_ns} ns) until it has released: a missing "
        f"{group} barrier lets the flag out before their data every time",
        "pass",
        patches,
        configs=settings.configs_for_site(release.name),
        family=Family.FORCED_ORDER,
    )


def _holding(catalog: Catalog, release: Site, group: str) -> Holding:
    publisher = catalog.target.publisher
    holding = publisher.holding(group) if publisher else None
    if holding is None:
        raise CatalogError(
            f"{catalog.path}: site {release.name} ({release.where()}) has producers={group}, "
            f"but the catalog names no [target.publisher.{group}]: who publishes, who is held"
        )
    return holding


def expose_faults(sites: list[Site], catalog: Catalog) -> dict[str, Fault]:
    """Both faults for every release whose producers are a warp, a CTA or a
    grid (a thread's own stores precede its release in program order: there is
    no one to hold back); a forced order only where its group has a cell."""
    faults: dict[str, Fault] = {}
    for release in sites:
        group = producers_of(release)
        if release.kind != "release" or group in (None, "thread"):
            continue
        holding = _holding(catalog, release, group)
        store = published_store(release, sites)
        if store is None:
            missing = (
                f"guards={release.guards} names no site"
                if release.guards
                else "no store site above it to hold back; name the one it publishes with guards="
            )
            raise CatalogError(
                f"{catalog.path}: site {release.name} ({release.where()}): {missing}"
            )
        settings = catalog.generate
        uneven = _uneven_delay(release, store, group, holding, settings)
        faults[uneven.id] = uneven
        if holding.cell is not None:
            forced = _forced_order(
                release, store, group, holding, catalog.target.publisher, settings
            )
            faults[forced.id] = forced
    return faults


def covering_faults(site: Site) -> list[str]:
    """The must-pass faults this module gives a release site, by id (none for
    another kind); those the loaded catalog holds cover it in the review."""
    if site.kind != "release":
        return []
    return [UNEVEN_PREFIX + site.name, FORCED_PREFIX + site.name]


def is_exposing(fault_id: str) -> bool:
    return fault_id.startswith((UNEVEN_PREFIX, FORCED_PREFIX))
