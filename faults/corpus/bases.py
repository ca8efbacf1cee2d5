"""A foreign bug's base release as its review takes it (docs/review.md,
"Foreign corpora"): the target's catalog loaded there (on a base older than
the catalog's pin, what the tree lacks left out, as review --older-trees
judges an older tree), the sites it holds, the bug's own among them, and
its sources' digest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from faults.catalog import Catalog, CatalogError, load_catalog
from faults.catalog.refs import without_missing_sites
from faults.corpus.bugs import CorpusError
from faults.corpus.releases import ReleaseBug, ReleaseCorpus
from faults.pipeline.scratch import tree_digest
from faults.review.model import OlderTree
from invariants.sync.sites import parse_tree


@dataclass(frozen=True)
class BaseSites:
    """What a bug's base holds for its review: the catalog loaded on it, its
    site names, the digest of its sources; `older`: a base the catalog does
    not load on, the line saying what of the catalog was left out there."""

    catalog: Catalog
    sites: frozenset[str]
    digest: str
    older: str = ""


def base_catalog(corpus: ReleaseCorpus, catalog_path: Path, tree: Path) -> tuple[Catalog, str]:
    """The catalog on a base `tree`, and ""; on a base older than the
    catalog's pin (it does not load there), the catalog with what the tree
    lacks left out, as review --older-trees judges an older tree, and the
    line saying so."""
    try:
        return load_catalog(catalog_path, tree_root=tree), ""
    except CatalogError as refused:
        given = load_catalog(catalog_path)  # malformed otherwise: the user's error, raised
        catalog, left_out = without_missing_sites(given, tree / given.target.sources)
        return catalog, str(OlderTree(corpus.catalog, str(refused), left_out))


def base_sites(
    corpus: ReleaseCorpus, bug: ReleaseBug, catalog_path: Path, tree: Path
) -> BaseSites:
    """The catalog on the bug's base `tree`, the bug's site checked there
    (the bug itself may break the site's anchors)."""
    catalog, older = base_catalog(corpus, catalog_path, tree)
    found = parse_tree(tree / catalog.target.sources, catalog.target.anchors)[0]
    sites = frozenset(site.name for site in found)
    if bug.bug.site and bug.bug.site not in sites:
        raise CorpusError(
            f"{corpus.path}: bug {bug.bug.name}: site {bug.bug.site}"
            f" is not a site of {corpus.catalog} on its base {bug.base.version}"
        )
    return BaseSites(catalog, sites, tree_digest(tree / catalog.target.sources), older)
