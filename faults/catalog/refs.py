"""What a catalog names must exist: the configs and fault ids its faults
name (and no include cycle), the sites its patches and `[generate]` name in
the tree's sources, and the functions its mutation rules' twins copy
(docs/catalog.md, "Pipeline of the fault engine", item 1, and
docs/operators.md, "Mutation operators")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from faults.catalog.anchors import site_key
from faults.catalog.errors import catalog_error
from faults.catalog.model import GENERATED_PREFIX, Catalog
from faults.catalog.mutation import TwinError, rule_twins, twin_copy
from invariants.sync.sites import (
    Site,
    SiteKind,
    SourceTree,
    anchored_sites,
    guard_problems,
)


def check_includes(catalog: Catalog) -> None:
    names = {c.name for c in catalog.configs}
    for fault in catalog.faults.values():
        for name in fault.configs:
            if name not in names:
                raise catalog_error(
                    catalog.path, f"fault {fault.id}", f"configs: unknown config {name!r}"
                )
        for included in fault.includes:
            if included not in catalog.faults:
                raise catalog_error(
                    catalog.path, f"fault {fault.id}", f"includes: unknown fault id {included!r}"
                )

    def visit(fault_id: str, chain: tuple[str, ...]) -> None:
        if fault_id in chain:
            cycle = " -> ".join((*chain[chain.index(fault_id) :], fault_id))
            raise catalog_error(catalog.path, f"fault {chain[0]}", f"includes: cycle {cycle}")
        for included in catalog.faults[fault_id].includes:
            visit(included, (*chain, fault_id))

    for fault_id in catalog.faults:
        visit(fault_id, ())


def check_sites_exist(catalog: Catalog, sources: Path) -> None:
    """Every site patch names a site of `sources` (an unknown site is a stale
    catalog), and so does every site `[generate]` names; every mutation
    rule's twin copies a function `sources` define once (check_twins);
    every [[target.site]] is found there (check_anchors)."""
    tree = SourceTree(sources, catalog.target.anchors)  # read once for every check
    check_anchors(catalog, tree)
    sites = tree.sites
    known = {site.name for site in sites}
    waits = {site.name for site in sites if site.kind == SiteKind.WAIT}
    settings = catalog.generate
    for site in dict(settings.survivor_ok):
        # A key naming one generated fault is checked where faults are generated.
        if not site.startswith(GENERATED_PREFIX) and site not in waits:
            raise catalog_error(
                catalog.path, "generate", f"survivor_ok: {site!r} is not a wait site in {sources}"
            )
    for key, table in (("site_configs", settings.site_configs), ("not_run", settings.not_run)):
        for prefix, _ in table:
            if not any(name.startswith(prefix) for name in known):
                raise catalog_error(
                    catalog.path, "generate", f"{key}: no site in {sources} starts {prefix!r}"
                )
    for owner, index, key, name in patch_sites(catalog):
        if name not in known:
            where = f"fault {owner}" if owner else "control"
            raise catalog_error(
                catalog.path,
                f"{where} patch #{index}",
                f"{key}: unknown site {name!r} in {sources}",
            )
    check_twins(catalog, sources, sites)


def anchor_problems(catalog: Catalog, tree: SourceTree) -> list[tuple[str, str, str]]:
    """(site name, its key, what is wrong) for each [[target.site]] that the
    sources `tree` do not hold as declared: an anchor missing or found twice,
    `end` before `begin`, its file missing, its name a comment site's too, an
    overlap, a `guards=` naming no store or compute site."""
    anchors = catalog.target.anchors
    if not anchors:
        return []
    declared = tree.comment_sites
    found, problems = anchored_sites(tree.root, anchors, declared)
    keys = {anchor.name: site_key(index, anchor.name) for index, anchor in enumerate(anchors)}
    wrong = [(finding.site, finding.message) for finding in problems]
    by_name = {site.name: site for site in [*declared, *found]}
    wrong += [(site.name, said) for site, said in guard_problems(found, by_name)]
    return [(name, keys[name], message) for name, message in wrong]


def check_anchors(catalog: Catalog, tree: SourceTree) -> None:
    """The first of anchor_problems, as the catalog's error."""
    for _, key, message in anchor_problems(catalog, tree)[:1]:
        raise catalog_error(catalog.path, key, message)


def check_twins(catalog: Catalog, sources: Path, sites: list[Site]) -> None:
    """Every `[[target.mutation]]` twin can be made from `sources`: its
    function defined there exactly once, its pattern matching in that body,
    and its name no other function of theirs; a twin whose names take the
    rule pattern's groups, as each match in `sites` expands them
    (faults/catalog/mutation.py)."""
    for index, rule in enumerate(catalog.target.mutations):
        try:
            for twin in rule_twins(rule, sites):
                twin_copy(sources, twin)
        except TwinError as error:
            where = f"target.mutation #{index} ({rule.family})"
            raise catalog_error(catalog.path, where, str(error)) from None


def patch_sites(catalog: Catalog):
    """(fault id, or None for the control; patch index; key; site name) for
    every site a patch names."""
    groups = [(f.id, f.patches) for f in catalog.faults.values()]
    for owner, patches in [*groups, (None, catalog.control)]:
        for index, patch in enumerate(patches):
            for key, name in (("site", patch.site), ("marker_site", patch.marker_site)):
                if name is not None:
                    yield owner, index, key, name


def without_missing_sites(
    catalog: Catalog, sources: Path
) -> tuple[Catalog, list[str | DroppedAnchor]]:
    """`catalog` made to judge an older tree at `sources`: what it names that
    the tree lacks is left out (a `[generate]` entry naming a missing site, a
    fault whose patch names one, the faults including such a fault, and a
    mutation rule whose twin the tree cannot make, as one that ships another
    function of its name), and said. A control patch naming a missing site
    cannot be left out. A [[target.site]] the tree does not hold as declared
    is left out too (its key named): the faults of its site no longer apply."""
    tree = SourceTree(sources)  # read once, under each set of anchors
    unheld = anchor_problems(catalog, tree)
    broken = {name for name, _, _ in unheld}
    anchors = tuple(a for a in catalog.target.anchors if a.name not in broken)
    catalog = replace(catalog, target=replace(catalog.target, anchors=anchors))
    sites = tree.with_anchors(anchors).sites
    known = {site.name for site in sites}
    settings = catalog.generate
    left_out = [
        key for key, _ in settings.survivor_ok if not any(names_site(key, s) for s in known)
    ]
    left_out += [
        prefix
        for prefix, _ in settings.site_configs
        if not any(name.startswith(prefix) for name in known)
    ]
    generate = replace(
        settings,
        survivor_ok=tuple((k, why) for k, why in settings.survivor_ok if k not in left_out),
        site_configs=tuple((p, c) for p, c in settings.site_configs if p not in left_out),
    )
    missing = [(o, i, name) for o, i, _, name in patch_sites(catalog) if name not in known]
    for owner, index, name in missing:
        if owner is None:
            raise catalog_error(
                catalog.path, f"control patch #{index}", f"unknown site {name!r} in {sources}"
            )
    dropped = {owner for owner, _, _ in missing}
    while extra := {f.id for f in catalog.faults.values() if set(f.includes) & dropped} - dropped:
        dropped |= extra
    faults = {i: f for i, f in catalog.faults.items() if i not in dropped}
    rules, unmade = [], []
    for index, rule in enumerate(catalog.target.mutations):
        try:
            for twin in rule_twins(rule, sites):
                twin_copy(sources, twin)
            rules.append(rule)
        except TwinError:
            unmade.append(f"target.mutation #{index} ({rule.family})")
    target = replace(catalog.target, mutations=tuple(rules))
    older = replace(catalog, target=target, generate=generate, faults=faults)
    anchored = [DroppedAnchor(name, key, message) for name, key, message in unheld]
    return older, anchored + left_out + sorted(dropped) + unmade


@dataclass(frozen=True)
class DroppedAnchor:
    """A [[target.site]] without_missing_sites left out: its site, its key
    (`target.site[i] (name)`) and why; said as `key: why`."""

    site: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


def names_site(key: str, site: str) -> bool:
    """Whether a `[generate.survivor_ok]` key names `site`: the site itself,
    or one generated fault of it (its id holds the site's name)."""
    return key == site or f".{site}." in f"{key}."


def entry_sites(
    catalog: Catalog, entry: str | DroppedAnchor, candidates: set[str]
) -> list[str]:
    """Which of `candidates` (site names) a catalog entry without_missing_sites
    may leave out names: a fault, through its patches and those of the faults
    it includes; a `[generate.survivor_ok]` key; a `[generate.site_configs]`
    prefix; a [[target.site]] the tree no longer holds (a DroppedAnchor: its site).
    A mutation rule names none."""
    if isinstance(entry, DroppedAnchor):
        return sorted({entry.site} & candidates)
    named: set[str] = set()
    if entry in catalog.faults:
        seen, todo = set(), [entry]
        while todo:
            fault = catalog.faults[todo.pop()]
            seen.add(fault.id)
            named |= {p.site for p in fault.patches} | {p.marker_site for p in fault.patches}
            todo += [i for i in fault.includes if i not in seen and i in catalog.faults]
    if entry in dict(catalog.generate.survivor_ok):
        named |= {site for site in candidates if names_site(entry, site)}
    if entry in dict(catalog.generate.site_configs):
        named |= {site for site in candidates if site.startswith(entry)}
    return sorted(named & candidates)
