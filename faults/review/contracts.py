"""A contract is a contract across the change (docs/review.md, "Contracts
across the change"): a site whose declared attributes (kind, producers,
consumers, scope, guards) differ between BASE and the change is a finding
naming old -> new, and the change's code is held to BASE's contract at those
sites as well as to its own, so weakening the promise does not excuse the code."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from faults.review.static import check_contract
from invariants.sync.finding import Finding
from invariants.sync.sites import Site, SourceTree

CONTRACT_FIELDS = ("kind", "producers", "consumers", "scope", "guards")


def attributes(site: Site) -> tuple[tuple[str, str], ...]:
    """The site's declared contract, field by field ("" where it declares none)."""
    said = []
    for name in CONTRACT_FIELDS:
        value = getattr(site, name)
        said.append((name, str(getattr(value, "value", value) or "")))  # an enum's word
    return tuple(said)


@dataclass(frozen=True)
class ContractChange:
    """One site's contract in BASE and in the change, where the change's tree holds it."""

    site: str
    file: str  # the change's, from the tree's root
    line: int
    old: tuple[tuple[str, str], ...]
    new: tuple[tuple[str, str], ...]

    @property
    def fields(self) -> list[str]:
        return [k for (k, a), (_, b) in zip(self.old, self.new, strict=True) if a != b]

    def finding(self) -> Finding:
        old, new = dict(self.old), dict(self.new)
        said = ", ".join(f"{k}={old[k] or '(none)'} -> {new[k] or '(none)'}" for k in self.fields)
        return Finding(self.file, self.line, f"its contract changed: {said}", self.site)


def contract_changes(base_sites: list[Site], sites: list[Site], tree: Path) -> list[ContractChange]:
    """Each site of both trees whose declared contract differs, in the change's order."""
    before = {site.name: attributes(site) for site in base_sites}
    changes = []
    for site in sites:
        old, new = before.get(site.name), attributes(site)
        if old is not None and old != new:
            where = site.path.resolve().relative_to(Path(tree).resolve()).as_posix()
            changes.append(ContractChange(site.name, where, site.lines.start, old, new))
    return changes


def with_base_contracts(sites: list[Site], base_sites: list[Site], names: set[str], anchors):
    """Rewrite each comment site of `sites` (in a copy of the sources) named in
    `names` to declare BASE's contract on its `// @site` line; the anchors,
    those named given BASE's attributes."""
    base = {site.name: site for site in base_sites}
    for site in sites:
        if site.name not in names or site.anchored:
            continue
        lines = site.path.read_text().split("\n")
        line = lines[site.start - 1]
        at = line.index("@site")
        tail = line[line.index("*/", at) :] if "*/" in line[at:] else ""
        lines[site.start - 1] = line[:at] + base[site.name].header() + (" " + tail if tail else "")
        site.path.write_text("\n".join(lines))
    return tuple(
        replace(a, attrs=tuple((k, v) for k, v in attributes(base[a.name]) if v))
        if a.name in names and a.name in base
        else a
        for a in anchors
    )


def held_to_base(
    tree: Path, target, changes: list[ContractChange], base_sites: list[Site], own: list[Finding]
) -> list[Finding]:
    """The change's code checked against BASE's contract at each site whose
    contract it changed: the findings its own contract does not already make,
    each said as under BASE's contract. None when no contract changed."""
    if not changes or target.contract is None:
        return []
    names = {change.site for change in changes}
    with tempfile.TemporaryDirectory(prefix="review-held-") as scratch:
        copy = Path(scratch) / "sources"
        shutil.copytree(tree / target.sources, copy)
        parsed = SourceTree(copy, target.anchors)  # read once, under both sets of anchors
        anchors = with_base_contracts(parsed.sites, base_sites, names, target.anchors)
        held = replace(target, anchors=anchors)
        check = check_contract(tree, held, sources=parsed.with_anchors(anchors))
        found = [replace(f, file=back_in_tree(f.file, copy, tree / target.sources, tree))
                 for f in check.findings]  # fmt: skip
    mine = set(own)
    return [
        replace(f, message=f"under BASE's contract: {f.message}")
        for f in found
        if f.site in names and f not in mine
    ]


def back_in_tree(file: str | None, copy: Path, sources: Path, tree: Path) -> str | None:
    """A finding's file in the copy, named as the change's tree names it."""
    if file is None:
        return None
    path = Path(file)
    if not path.is_absolute():
        path = tree / path
    try:
        inside = path.resolve().relative_to(copy.resolve())
    except ValueError:
        return file
    return (sources / inside).relative_to(tree).as_posix()
