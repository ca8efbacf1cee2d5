"""Mutation operators: realistic ordering bugs generated from the sites
(docs/operators.md, "Mutation operators"). The operators are generic text
rewrites inside a site's region; the target's spellings (its barrier, its
release store, its wait helper) come from the catalog's `[[target.mutation]]`
entries. One structural operator, publish-early, moves a release above the
store site it guards. Every mutant is a must-fail text patch whose marker
opens the mutated site, tagged with its family; a rule's `twin` adds the
copy of a function the rewritten site calls, made in the mutant's tree only;
a rule's `expose` adds a delay that holds the mutant's window open."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from faults.catalog.errors import CatalogError
from faults.catalog.model import GENERATED_PREFIX, Fault, GenerateSettings, MutationRule, Patch
from faults.catalog.mutation import TwinCopy, TwinError, region_matches, twin_copy
from faults.operators import ORDER_FAMILIES, REWRITE_FAMILIES, Family, operator
from invariants.sync.sites import Site, published_store

__all__ = ["TAG", "family_hint", "mutants", "tagged"]

Twin = MutationRule.Twin


# The comment that ends every line the engine injects, so it is known for its
# owner's (faults/pipeline/apply.py tags its own lines with it too).
TAG = "  // AFDFAULT {owner} {note}"


def tagged(line: str, owner: str, note: str) -> str:
    """`<line>  // AFDFAULT <owner> <note>`: a line injected for `owner`."""
    return line + TAG.format(owner=owner, note=note)


def family_hint(family: Family | None) -> str | None:
    """Why a must-fail mutant of `family` can run clean, and what opens its
    window (its operator's hint, faults/operators/)."""
    return operator(family).hint if family is not None else None


# ---------------------------------------------------------------- generation
@dataclass(frozen=True)
class Edit:
    """One rewrite (or move) of one site: its text before and after, the
    condition of its exposing delay (None: the mutant holds no one back), and
    the twins its rewritten site calls, expanded for its match (none: no
    copy to make)."""

    site: Site
    title: str
    old: str
    new: str
    exposing: str | None = None
    twins: tuple[Twin, ...] = ()


def mutants(
    sites: list[Site],
    rules: tuple[MutationRule, ...],
    settings: GenerateSettings,
    sources: Path,
    anchored: frozenset[str] = frozenset(),
) -> dict[str, Fault]:
    """One must-fail fault per (rule, site of its kind, match), and one
    publish-early fault per release site whose guarded store it can be moved
    above. Ids: `gen.<family>.<site>`, with `.<n>` (from 1) when a family
    mutates one site more than once. `anchored`: the sites the catalog
    declares by anchors, written into `sources` as comment lines, which a
    title's line leaves out (the line is the user's)."""
    found: dict[tuple[Family, str], list[Edit]] = {}
    for family, edit in _rewrites(sites, rules, sources, anchored):
        edits = found.setdefault((family, edit.site.name), [])
        # two entries, one rewrite: one mutant
        if all((other.new, other.twins) != (edit.new, edit.twins) for other in edits):
            edits.append(edit)
    copies: dict[Twin, TwinCopy] = {}  # each twin's copy, made once
    faults = {}
    for (family, name), edits in found.items():
        for number, edit in enumerate(edits, start=1):
            fault_id = f"{GENERATED_PREFIX}{family}.{name}" + (
                f".{number}" if len(edits) > 1 else ""
            )
            faults[fault_id] = Fault(
                fault_id,
                edit.title,
                "fail",
                _patches(fault_id, edit, sites, settings, sources, copies),
                # A wait another wait covers opens no race however early it passes;
                # an order mutant's survival is the contract's to judge instead.
                survivor_ok=settings.survivor_for(
                    fault_id, None if family in ORDER_FAMILIES else name
                ),
                configs=settings.configs_for_site(name),
                family=family,
            )
    return faults


def _patches(
    fault_id: str,
    edit: Edit,
    sites: list[Site],
    settings: GenerateSettings,
    sources: Path,
    copies: dict[Twin, TwinCopy],
) -> tuple[Patch, ...]:
    """The rewrite, its marker opening the mutated site; then its twin, when
    the rule has one (_twin_patch); then, when the rule exposes, a delay of
    the producers its condition names at the start of the store the release
    publishes, or the wait guards (docs/operators.md, "Delays that
    expose"): the mutant's window held open, silent (the rewrite's marker
    says it fired)."""
    rewrite = Patch(
        fault_id,
        file=edit.site.path.relative_to(sources).as_posix(),
        old=edit.old,
        new=edit.new,
        marker=settings.marker,
        marker_site=edit.site.name,
    )
    patches = (rewrite,)
    for twin in edit.twins:
        made = _twin_patch(fault_id, twin, sources, copies)
        patches += (made,) if made is not None else ()
    if edit.exposing is None:
        return patches
    store = _exposed_store(edit.site, sites)
    if store is None:
        raise CatalogError(
            f"fault {fault_id}: its rule exposes, but site {edit.site.name} "
            f"({edit.site.where()}) {_store_verb(edit.site)} no store site to delay: "
            "name it with guards="
        )
    return (*patches, settings.held_back(fault_id, store.name, edit.exposing, marker="false"))


def _twin_patch(
    fault_id: str, twin: Twin, sources: Path, copies: dict[Twin, TwinCopy]
) -> Patch | None:
    """The twin made in the mutant's tree: the definition of `twin.of`,
    exactly once (a stale catalog's does not apply), becomes itself and then
    its copy, each line of the copy tagged for `fault_id`. The rewrite's
    marker says the fault ran: the copy's marker is `false`, none. None
    where the sources define the twin already, exactly so."""
    if twin not in copies:
        try:
            copies[twin] = twin_copy(sources, twin)
        except TwinError as error:
            raise CatalogError(f"fault {fault_id}: {error}") from None
    made = copies[twin]
    if made.existing is not None:
        return None
    note = f"twin {twin.name} of {twin.of}"
    copy = "".join(tagged(line, fault_id, note) + "\n" for line in made.copy.splitlines())
    old = made.definition.source
    return Patch(
        fault_id,
        file=made.definition.path.relative_to(sources).as_posix(),
        old=old,
        new=old + copy if old.endswith("\n") else f"{old}\n{copy}",
        marker="false",
    )


def _exposed_store(site: Site, sites: list[Site]) -> Site | None:
    """The store an exposing delay holds back: the one `site` publishes, a
    wait's only by its `guards=` (the data it waits for is made elsewhere,
    not in the site above it)."""
    if site.kind == "wait" and not site.guards:
        return None
    return published_store(site, sites)


def _held_back_words(site: Site, exposing: str) -> str:
    """What a mutant's title says of its exposing delay."""
    who = "every producer" if exposing.strip() == "true" else f"producers with {exposing}"
    return f"; {who} delayed before the store it {_store_verb(site)}"


def _store_verb(site: Site) -> str:
    """How `site` stands to the store its exposing delay holds back."""
    return "guards" if site.kind == "wait" else "publishes"


def user_line(sites: list[Site], path: Path, line: int, anchored: frozenset[str]) -> int:
    """Line `line` of an annotated `path` (faults/generate/annotate.py) as the
    user's file numbers it: less each anchored site's `// @site` line and
    `// @end` line above it."""
    above = 0
    for site in sites:
        if site.path == path and site.name in anchored:
            above += (site.start < line) + (site.end < line)
    return line - above


def _rewrites(
    sites: list[Site], rules: tuple[MutationRule, ...], sources: Path, anchored=frozenset()
) -> Iterator[tuple[Family, Edit]]:
    """(family, edit) for every rewrite and every move. The patch's `old`
    runs from the line of the match to the site's `@end` line: unique in its
    file (site names are), and inside the region for its marker."""
    by_name = {site.name: site for site in sites}
    for rule in rules:
        for site in sites:
            for body, end, match in region_matches(rule, site):
                line_start = body.rfind("\n", 0, match.start()) + 1
                rewritten = match.expand(rule.replacement)
                if rewritten == match[0]:
                    continue
                line = site.start + 1 + body.count("\n", 0, match.start())
                where = f"{site.path.name}:{user_line(sites, site.path, line, anchored)}"
                title = f"{rule.family} in {site.name} ({where}): {match[0]!r} -> {rewritten!r}"
                exposing = match.expand(rule.expose) if rule.expose is not None else None
                if exposing is not None:
                    title += _held_back_words(site, exposing)
                old = body[line_start:] + end
                new = body[line_start : match.start()] + rewritten + body[match.end() :] + end
                twins = tuple(twin.expanded(match) for twin in rule.twins)
                yield rule.family, Edit(site, title, old, new, exposing, twins)
    for site in sites:
        moved = _publish_early(site, by_name, sites, anchored)
        if moved is not None:
            yield Family.PUBLISH_EARLY, Edit(site, *moved)


def _publish_early(
    release: Site, by_name: dict[str, Site], sites: list[Site], anchored: frozenset[str]
) -> tuple[str, str, str] | None:
    """The release region moved above the store region it guards: (title,
    old, new), or None when the release declares no guarded store, or the
    two do not lie in one block of one file (a move across blocks would not
    compile, or would change what runs, not only the order)."""
    store = by_name.get(getattr(release, "guards", None) or "")
    if release.kind != "release" or store is None:
        return None
    if store.path != release.path or store.end >= release.start:
        return None
    lines = release.path.read_text().splitlines(keepends=True)
    before = lines[store.start - 1 : release.start - 1]  # the store region and what follows it
    region = lines[release.start - 1 : release.end]
    if not _one_block("".join(before + region)):
        return None
    title = (
        f"publish-early: {release.name} moved above {store.name}, the store it guards "
        f"({release.path.name}:{user_line(sites, store.path, store.start + 1, anchored)})"
    )
    return title, "".join(before + region), "".join(region + before)


def _one_block(text: str) -> bool:
    """The text opens no block it does not close and closes none it did not open."""
    depth = 0
    for line in text.splitlines():
        for char in line.split("//", 1)[0]:
            depth += {"{": 1, "}": -1}.get(char, 0)
            if depth < 0:
                return False
    return depth == 0
