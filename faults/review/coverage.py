"""Which faults cover a site: the rule the review applies to every site a
change touches (docs/review.md, "The pre-merge review")."""

from __future__ import annotations

from dataclasses import dataclass, field

from faults.catalog import Catalog
from invariants.sync.sites import Site


@dataclass
class Coverage:
    """A site's covering faults. Must pass: a fault delaying it (for a wait: the
    site it guards). Must fail: a fault skipping it, or delaying it while
    skipping a wait that guards it. A store or compute site no wait guards
    (data read in stream order) needs no must-fail fault."""

    site: Site
    guarded: bool = False  # some wait guards this site
    passing: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)
    # Why no config runs the site's code ([generate.not_run]): no fault can
    # cover it, so none is missing; the contract is its only check.
    not_run: str | None = None

    @property
    def needs_failing(self) -> bool:
        return self.site.kind in ("wait", "release") or self.guarded

    @property
    def faults(self) -> list[str]:
        return [*self.passing, *self.failing]

    @property
    def missing(self) -> list[str]:
        if self.not_run is not None:
            return []
        gaps = []
        if not self.passing:
            what = (
                f"delays {self.site.guards}, the site it guards"
                if self.site.guards
                else "delays it"
            )
            gaps.append(f"no must-pass fault {what}")
        if self.needs_failing and not self.failing:
            gaps.append(
                "no must-fail fault exercises it (skips it, or delays it while "
                "skipping a wait that guards it)"
            )
        return gaps


def coverage(catalog: Catalog, sites: list[Site]) -> dict[str, Coverage]:
    """Which faults of `catalog` (generated ones included, if added) cover each site."""
    guarded_by: dict[str, set[str]] = {}
    for site in sites:
        if site.guards:
            guarded_by.setdefault(site.guards, set()).add(site.name)
    by_name = {
        site.name: Coverage(
            site,
            guarded=site.name in guarded_by,
            not_run=catalog.generate.not_run_why(site.name),
        )
        for site in sites
    }
    for fault in catalog.faults.values():
        patches = catalog.all_patches(fault.id)
        delayed = {p.site for p in patches if p.action == "delay"}
        skipped = {p.site for p in patches if p.action == "skip"}
        for name, cover in by_name.items():
            delays_it = name in delayed or (
                cover.site.kind == "wait" and cover.site.guards in delayed
            )
            if fault.expect == "pass" and delays_it:
                cover.passing.append(fault.id)
            exercised = name in skipped or (
                name in delayed and skipped & guarded_by.get(name, set())
            )
            if fault.expect == "fail" and exercised:
                cover.failing.append(fault.id)
    return by_name
