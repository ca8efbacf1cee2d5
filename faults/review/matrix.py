"""Where the review's runs go (docs/review.md, "The pre-merge review"): the
change's tree under every config of the catalog's matrix the GPUs here can
hold, with a marker-only probe at each site it needs to see, so that the
same clean runs say which configs execute which site; then each covering
fault under the configs where its sites fire, never under a hand-kept list."""

from __future__ import annotations

from dataclasses import dataclass, field

from faults.catalog import Catalog, Config, Patch
from faults.judge.run_result import RunResult
from faults.pipeline.engine import CLEAN
from faults.review.coverage import Coverage

PROBE_PREFIX = "probe."  # a probe's marker id: this, then its site's name


@dataclass
class ConfigPlan:
    """The configs the change's tree runs under: the catalog's matrix at its
    own sizes (a real-size config only where a touched site fires), each that
    fits the GPUs here; the others with why they do not run here."""

    run: list[Config]
    not_run: dict[str, str] = field(default_factory=dict)  # config -> why not here
    chosen: str = "the catalog's configs"  # how they were chosen: its [matrix], in words


def config_plan(catalog: Catalog, gpus: int, chosen: str = "") -> ConfigPlan:
    """Every config but the real-size ones, in the catalog's order; a config
    needing more GPUs than `gpus` is listed as not run, with its need (with
    logical ranks on one GPU every config needs one, so every config runs).
    `chosen`: how those configs were chosen (its [matrix], in words)."""
    plan = ConfigPlan([], chosen=chosen) if chosen else ConfigPlan([])
    for config in catalog.configs:
        if config.base is not None:
            continue
        need = catalog.gpus_for(config)
        if need <= gpus:
            plan.run.append(config)
        else:
            plan.not_run[config.name] = f"needs {need} GPUs, {gpus} here"
    return plan


def real_size_configs(catalog: Catalog, configs: list[str]) -> list[Config]:
    """The real-size configs of `configs` the catalog has (none without [exposure]
    or with --no-exposure)."""
    return [c for c in catalog.configs if c.base is not None and c.base in configs]


def probe_id(site: str) -> str:
    return PROBE_PREFIX + site


def patched_sites(catalog: Catalog, fault_ids: list[str]) -> list[str]:
    """Every site the faults patch (their includes' too), in fault order."""
    patches = [p for fault_id in fault_ids for p in catalog.all_patches(fault_id)]
    return list(dict.fromkeys(p.site for p in patches if p.site))


def probed_sites(catalog: Catalog, touched: list[Coverage]) -> list[str]:
    """The touched sites, then every other site a covering fault patches: a
    fault runs only where all of its sites fire."""
    names = [cover.site.name for cover in touched]
    names += patched_sites(catalog, [f for cover in touched for f in cover.faults])
    return list(dict.fromkeys(names))


def where_all_fire(
    catalog: Catalog, fault_id: str, fired: dict[str, Firing], configs: list[Config]
) -> list[Config]:
    """The configs among `configs` whose clean run fired every site the fault
    patches: elsewhere it opens no window (a skipped wait whose guarded store
    never runs there), and its run would prove nothing."""
    sites = patched_sites(catalog, [fault_id])
    return [c for c in configs if all(c.name in fired[site].fires for site in sites)]


def probes(catalog: Catalog, sites: list[str]) -> tuple[Patch, ...]:
    """A zero-ns delay at the start of each site, in the threads the catalog's
    generated markers sample: it spins nothing and prints `AFDFAULT probe.<site>`
    each time those threads run the site, as a generated fault of the site would."""
    marker = catalog.generate.marker
    return tuple(
        Patch(probe_id(site), site=site, action="delay", ns=0, when=marker) for site in sites
    )


@dataclass
class Firing:
    """Where one site executes, from its probe's markers in the clean runs."""

    site: str
    fires: list[str] = field(default_factory=list)  # configs whose clean run printed its marker
    never: list[str] = field(default_factory=list)  # configs whose clean run passed without it
    unknown: list[str] = field(default_factory=list)  # failed before printing it: not known

    @property
    def uncovered(self) -> bool:
        """It fires under no config that ran to the end, and no failed run
        leaves that unknown: no run covers it (no config running here at all
        included)."""
        return not self.fires and not self.unknown

    def __str__(self) -> str:
        said = [f"fires under: {', '.join(self.fires) or 'none'}"]
        if not (self.fires or self.never or self.unknown):
            said.append("no clean run here")
        if self.never:
            said.append(f"never under: {', '.join(self.never)}")
        if self.unknown:
            said.append(f"not known under: {', '.join(self.unknown)} (the clean run failed)")
        return "; ".join(said)


def firing(sites: list[str], controls: list[RunResult]) -> dict[str, Firing]:
    """Each site's Firing over the clean runs among `controls`, in their order."""
    found = {site: Firing(site) for site in sites}
    for run in controls:
        if run.fault != CLEAN or run.outcome is None:  # not run: says nothing
            continue
        markers = run.outcome["markers"]
        for site, fired in found.items():
            if markers.get(probe_id(site), 0):
                fired.fires.append(run.config)
            elif run.ok:
                fired.never.append(run.config)
            else:
                fired.unknown.append(run.config)
    return found


def fault_configs(
    catalog: Catalog, touched: list[Coverage], fired: dict[str, Firing], ran: list[Config]
) -> dict[str, list[Config]]:
    """Each covering fault's configs among `ran`: where a touched site it
    covers fires and every site it patches fires too (a skipped wait whose
    guarded store never runs there opens no window). A fault with none is
    listed with no config."""
    chosen: dict[str, list[Config]] = {}
    for cover in touched:
        for fault_id in cover.faults:
            covered = [c for c in ran if c.name in fired[cover.site.name].fires]
            here = where_all_fire(catalog, fault_id, fired, covered)
            known = chosen.setdefault(fault_id, [])
            known += [c for c in here if c not in known]
    order = {c.name: i for i, c in enumerate(ran)}
    return {f: sorted(configs, key=lambda c: order[c.name]) for f, configs in chosen.items()}
