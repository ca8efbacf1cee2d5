"""Faults generated from sites, so coverage does not depend on who thought of
what: every wait is skipped while the site it guards is delayed (must fail),
and every store, release and compute site is delayed (must pass); every
release is also skipped (must fail: its waiter can only time out), so each
release has a fault that proves something waits for it. The mutants of
faults/generate/mutate.py (the catalog's `[[target.mutation]]` rewrites, and
publish-early) join them, each tagged with its family."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from faults.catalog import Catalog, Fault, GenerateSettings, Patch
from faults.catalog.errors import catalog_error
from faults.catalog.model import GENERATED_PREFIX
from faults.generate.annotate import annotated_copy
from faults.generate.expose import expose_faults
from faults.generate.mutate import mutants
from faults.operators import Family
from invariants.sync.sites import Site

SKIP_PREFIX = "gen.skip."
DELAY_PREFIX = "gen.delay."


def generated_faults(sites: list[Site], settings: GenerateSettings) -> dict[str, Fault]:
    faults: dict[str, Fault] = {}
    for site in sites:
        if site.kind == "wait":
            fault_id = SKIP_PREFIX + site.name
            patches = (
                Patch(
                    fault_id,
                    site=site.guards,
                    action="delay",
                    ns=settings.window_ns or settings.ns,
                    when=settings.when,
                    marker=settings.marker,
                ),
                Patch(fault_id, site=site.name, action="skip", marker=settings.marker),
            )
            faults[fault_id] = Fault(
                fault_id,
                f"skip {site.name} while delaying {site.guards}, the site it guards",
                "fail",
                patches,
                survivor_ok=settings.survivor_for(fault_id, site.name),
                configs=settings.configs_for_site(site.name),
                family=Family.SKIP_WAIT,
            )
        else:
            if site.kind == "release":
                skip_id = SKIP_PREFIX + site.name
                faults[skip_id] = Fault(
                    skip_id,
                    f"skip the release {site.name}: its waiter must time out",
                    "fail",
                    (Patch(skip_id, site=site.name, action="skip", marker=settings.marker),),
                    configs=settings.configs_for_site(site.name),
                    family=Family.SKIP_RELEASE,
                )
            fault_id = DELAY_PREFIX + site.name
            patch = Patch(
                fault_id,
                site=site.name,
                action="delay",
                ns=settings.ns,
                when=settings.when,
                marker=settings.marker,
            )
            faults[fault_id] = Fault(
                fault_id,
                f"delay {site.name} ({site.kind})",
                "pass",
                (patch,),
                configs=settings.configs_for_site(site.name),
                family=Family.DELAY,
            )
    return faults


def with_generated(catalog: Catalog, tree_root: Path) -> Catalog:
    """The catalog plus the faults generated from every site under its
    sources: the site actions above, then the mutants."""
    target = catalog.target
    with annotated_copy(Path(tree_root) / target.sources, target.anchors) as sources:
        sites = sources.sites  # a rewrite's text as the scratch trees hold it
        # A site no config runs has no fault: nothing would fire it.
        sites = [site for site in sites if catalog.generate.not_run_why(site.name) is None]
        generated = generated_faults(sites, catalog.generate)
        anchored = frozenset(anchor.name for anchor in target.anchors)
        generated.update(mutants(sites, target.mutations, catalog.generate, sources.root, anchored))
        # docs/operators.md, "Delays that expose"
        generated.update(expose_faults(sites, catalog))
    for key, _ in catalog.generate.survivor_ok:
        if key.startswith(GENERATED_PREFIX) and key not in generated:
            raise catalog_error(
                catalog.path, "generate", f"survivor_ok: {key!r} is not a generated fault"
            )
    extra = {k: v for k, v in generated.items() if k not in catalog.faults}
    return replace(catalog, faults={**catalog.faults, **extra})


GENERATED_PREFIXES = (SKIP_PREFIX, DELAY_PREFIX) + tuple(f"{GENERATED_PREFIX}{f}." for f in Family)


def is_generated(fault_id: str) -> bool:
    return fault_id.startswith(GENERATED_PREFIXES)
