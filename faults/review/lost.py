"""What a change's broken annotations cost (docs/review.md, "The pre-merge
review"): each site of BASE the change's tree no longer has as a site, where
BASE had it and how it went, and each catalog entry that named it and so no
longer applies. A site removed or renamed with its catalog entries and its
primitives, cleanly, is no finding."""

from __future__ import annotations

import re
from pathlib import Path

from faults.catalog import Catalog
from faults.catalog.refs import entry_sites, patch_sites
from faults.review.model import GoneSite, LostEntry, SiteLoss
from invariants.sync.finding import Finding, tree_relative
from invariants.sync.sites import Site, site_body


def lost_entries(
    own: Catalog, lost: list[str], base: list[Site], kept: set[str]
) -> list[LostEntry]:
    """Each entry of the change's own catalog that no longer applies, with
    the sites it names that the change's tree (`kept`: its site names) lacks:
    BASE's, or ones the catalog names that no tree has."""
    candidates = ({site.name for site in base} | {n for *_, n in patch_sites(own)}) - kept
    return [LostEntry(entry, tuple(entry_sites(own, entry, candidates))) for entry in lost]


def mentions(message: str, name: str) -> bool:
    """Whether a site-rule finding's message names the site `name`, whole."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", message) is not None


def flagged_lines(tree: Path, unsited: list[Finding]) -> set[str]:
    """The text of each line a site-rule finding of the change flags, stripped."""
    texts = set()
    for finding in unsited:
        if finding.file is not None and finding.line is not None:
            lines = (tree / finding.file).read_text().splitlines()
            texts.add(lines[finding.line - 1].strip())
    return texts - {""}


def gone_sites(
    base: list[Site],
    base_tree: Path,
    kept: set[str],
    unsited: list[Finding],
    tree: Path,
    lost: list[LostEntry],
) -> list[GoneSite]:
    """The sites of BASE (`base`, parsed under `base_tree`, still there to
    read) and of the catalog that the change's tree lacks and that count: one
    a lost entry names; one a site-rule finding of the change names (left
    open, or a guard naming it dangling); one whose BASE body holds a line
    such a finding flags (a primitive it held, now outside every site)."""
    flagged = flagged_lines(tree, unsited)
    by_name = {site.name: site for site in base}
    named = {site for entry in lost for site in entry.sites}
    gone = []
    for name in sorted(named | (set(by_name) - kept)):
        site = by_name.get(name)
        broken = any(mentions(finding.message, name) for finding in unsited)
        held = site is not None and bool(flagged & {line.strip() for line in site_body(site)})
        if name in named or broken or held:
            how = SiteLoss.BROKEN if broken else SiteLoss.GONE
            if site is None:
                gone.append(GoneSite(name, None, None, how))
            else:
                where = tree_relative(site.path, base_tree)
                gone.append(GoneSite(name, where, site.lines.start, how))  # an anchor's first line
    return sorted(gone, key=lambda g: (g.file is None, g.file or "", g.line or 0, g.name))
