"""The pre-merge ordering review: what a change does to the synchronization.

    afdep-faults review BASE [CHANGE] [--run] [--report FILE] [--sarif FILE]

From the git diff BASE..CHANGE (CHANGE omitted: the working tree) under the
catalog's sources: the sites the change touches; ordering primitives it adds
outside any site; the publish contract of every site on the changed tree
(invariants.sync.contract, no GPU); and, for each touched site, the faults that cover
it - a must-pass fault that delays it and a must-fail fault that exercises it,
from the catalog or generated from the sites. With --run (and the hardware
the target needs) the change's own tree runs first, then the covering faults,
in scratch trees. Without --run it is the static review, the one the
pre-commit hook runs (docs/review.md, "The pre-merge review").
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path

from faults.catalog import Catalog, CatalogError, load_catalog
from faults.catalog.refs import check_sites_exist, without_missing_sites
from faults.generate.site_faults import with_generated
from faults.pipeline.scratch import make_scratch
from faults.review.carry import as_declared, carried
from faults.review.contracts import contract_changes, held_to_base
from faults.review.coverage import Coverage, coverage
from faults.review.diff import ReviewError, changed_lines, check_refs, in_repo
from faults.review.lost import gone_sites, lost_entries
from faults.review.markdown import markdown
from faults.review.model import OlderTree, Review, ReviewVerdict
from faults.review.runs import RunReport, run_review
from faults.review.static import base_contract, check_contract, without_pre_existing
from hostio import RankMode
from invariants.sync.finding import Finding
from invariants.sync.sites import SourceTree
from invariants.sync.spellings import primitive_pattern

__all__ = [
    "Coverage",
    "OlderTree",
    "Review",
    "ReviewError",
    "ReviewVerdict",
    "RunReport",
    "check_refs",
    "coverage",
    "markdown",
    "review",
    "run_review",
]


def change_catalog(repo_root: Path, tree: Path, catalog_path: Path) -> Path:
    """The catalog as the change's tree has it, for a catalog inside the
    repository: a change that renames a site renames it in its catalog too,
    whatever is checked out. A catalog outside it is taken as given."""
    inside = in_repo(catalog_path, repo_root)
    return tree / inside if inside and (tree / inside).is_file() else Path(catalog_path)


def review_catalog(
    repo_root: Path,
    tree: Path,
    catalog_path: Path,
    rank_mode: RankMode,
    *,
    generated: bool,
    older_trees: bool,
    base_tree: Path | None = None,
) -> tuple[Catalog, OlderTree | None, list[str], Catalog | None]:
    """The catalog that judges `tree`, what of it no longer applies, and the
    whole catalog that was cut. Its own catalog; when the change removed,
    renamed or left open a site that catalog names, what names it is left out
    and returned: a finding of the change (a catalog that is malformed apart
    from that is the user's error). With
    `older_trees`, a tree whose own catalog this review cannot take (one
    older than its present form) is judged by the given catalog, what it
    names that the tree lacks left out, and said. With `base_tree`, an
    anchored site whose text the change rewrote is carried through the diff
    from where BASE's sources hold it (faults/review/carry.py)."""

    def prepared(catalog: Catalog) -> Catalog:
        catalog = catalog.in_rank_mode(rank_mode)
        return with_generated(catalog, tree) if generated else catalog

    def loaded(path: Path) -> Catalog:
        catalog = load_catalog(path)
        if base_tree is None or not catalog.target.anchors:
            return catalog
        sources = catalog.target.sources
        anchors = carried(catalog.target.anchors, base_tree / sources, tree / sources)
        return replace(catalog, target=replace(catalog.target, anchors=anchors))

    own_path = change_catalog(repo_root, tree, catalog_path)
    try:
        own = loaded(own_path)
        check_sites_exist(own, tree / own.target.sources)
        return prepared(own), None, [], None
    except CatalogError as refused:
        if older_trees:
            given = loaded(catalog_path)
            catalog, left_out = without_missing_sites(given, tree / given.target.sources)
            older = OlderTree(str(catalog_path), str(refused), left_out)
            return prepared(catalog), older, [], None
        own = loaded(own_path)  # malformed otherwise: the user's error, raised
        kept, lost = without_missing_sites(own, tree / own.target.sources)
        if not lost:
            raise
        return prepared(kept), None, lost, own


def unsited_findings(found: list[Finding], before: list[Finding], changed) -> list[Finding]:
    """The site-rule findings the change makes: those on a line it changed,
    then, where the change's tree has more of one file's same finding than
    BASE's (lines move, so by file and message), as many of the others as
    there are more: a primitive left outside every site when the change
    dropped its annotations, a region left open."""
    on_changed = [f for f in found if f.line in changed(f.file)]
    had = Counter((f.file, f.message) for f in before)
    more = Counter((f.file, f.message) for f in found)
    more.subtract(had)
    more.subtract(Counter((f.file, f.message) for f in on_changed))
    others = []
    for finding in found:
        key = (finding.file, finding.message)
        if finding not in on_changed and more[key] > 0:
            others.append(finding)
            more[key] -= 1
    return [f for f in found if f in on_changed or f in others]


def review(
    repo_root: Path,
    base: str,
    change: str | None,
    catalog_path: Path,
    *,
    generated: bool = True,
    workdir: Path,
    rank_mode: RankMode = RankMode.PER_GPU,
    older_trees: bool = False,
) -> tuple[Review, Catalog]:
    """The static review of BASE..CHANGE: no GPU, no run (`rank_mode`: how
    the catalog returned places the ranks of the runs --run makes)."""
    check_refs(repo_root, base, change)
    tree = make_scratch(repo_root, workdir / "change", ref=change) if change else Path(repo_root)
    with tempfile.TemporaryDirectory(prefix="review-base-") as scratch:  # read, then gone
        base_tree = make_scratch(repo_root, Path(scratch) / "base", ref=base)
        catalog, older, lost, own = review_catalog(
            repo_root, tree, catalog_path, rank_mode,
            generated=generated, older_trees=older_trees, base_tree=base_tree,
        )  # fmt: skip
        sources = tree / catalog.target.sources
        primitives = primitive_pattern(catalog.target.contract)  # the target's words
        parsed = SourceTree(sources, catalog.target.anchors, primitives)  # read once
        sites, violations = parsed.sites, parsed.violations
        kept = {site.name for site in sites}
        changed = changed_lines(repo_root, base, change, catalog.target.sources)

        def lines_of(path: Path) -> set[int]:
            return changed.get(str(path.relative_to(sources)), set())

        def changed_in(file: str) -> set[int]:  # a finding's file, from the tree's root
            return lines_of(tree / file)

        # BASE is read with every anchor the catalog declares (as declared, not
        # carried): the change's catalog has left out those its own tree no longer holds.
        anchors = as_declared((own or catalog).target.anchors)
        base_parsed = SourceTree(base_tree / catalog.target.sources, anchors, primitives)
        base_sites, base_violations = base_parsed.sites, base_parsed.violations
        had = [v.from_root(base_tree) for v in base_violations]
        unsited = unsited_findings([v.from_root(tree) for v in violations], had, changed_in)
        lost_ones = lost_entries(own, lost, base_sites, kept) if own is not None else []
        gone = gone_sites(base_sites, base_tree, kept, unsited, tree, lost_ones)
        declared = declared_in_base(repo_root, base_tree, catalog_path, base_parsed)
        changes = contract_changes(declared, sites, tree)
        contract = check_contract(tree, catalog.target, parsed)
        if contract.findings:  # BASE's too, with its anchors as declared, while it is here
            base_target = replace(catalog.target, anchors=anchors)
            base_check = base_contract(base_tree, base_target, base_parsed)
            contract = without_pre_existing(contract, base_check)
    held = held_to_base(tree, catalog.target, changes, declared, contract.findings)
    covers = coverage(catalog, sites)
    touched = [covers[s.name] for s in sites if lines_of(s.path) & set(s.lines)]
    result = Review(
        base, change or "working tree", tree, catalog.target.sources, changed, touched,
        unsited, contract, older=older, lost=lost_ones, gone=gone,
        contract_changes=changes, held_to_base=held,
    )  # fmt: skip
    return result, catalog


def declared_in_base(repo_root, base_tree: Path, catalog_path: Path, parsed: SourceTree):
    """BASE's sites as BASE declared them: an anchored site's contract by
    BASE's own catalog (`parsed`: BASE's sources read with the change's anchors)."""
    base_anchors = own_anchors(repo_root, base_tree, catalog_path, parsed.anchors)
    if base_anchors == parsed.anchors:
        return parsed.sites
    return parsed.with_anchors(base_anchors).sites


def own_anchors(repo_root: Path, tree: Path, catalog_path: Path, fallback) -> tuple:
    """The anchors `tree`'s own catalog declares (a catalog outside the
    repository, or one that tree's catalog cannot load: `fallback`)."""
    path = change_catalog(repo_root, tree, catalog_path)
    if path == Path(catalog_path) and not in_repo(catalog_path, repo_root):
        return fallback
    try:
        return load_catalog(path).target.anchors
    except CatalogError:
        return fallback
