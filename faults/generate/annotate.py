"""Anchored sites written in as comment sites: in a scratch tree before its
faults patch it (faults/pipeline/scratch.py), and in the copy the faults are
generated from (faults/generate/site_faults.py), so a generated patch's text
is the text of the tree it is applied to (docs/synchronization.md, "The site
grammar")."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from faults.catalog.errors import FaultsError
from invariants.sync.sites import SourceTree, anchored_sites


def annotate(sources: SourceTree, anchors) -> None:
    """Each site `anchors` declare in the scratch `sources` written in as the
    comment site it is: its `// @site` line (its name and attributes) above
    its first line, `// @end` below its last, at the first line's indent. A
    catalog's anchors were found in the user's tree at its load; one the
    scratch tree does not hold is an error of the engine's caller."""
    sites, problems = anchored_sites(sources.root, anchors, sources.comment_sites)
    if problems:
        raise FaultsError(f"{sources.root}: anchored site {problems[0].said}")
    for site in sorted(sites, key=lambda site: site.start, reverse=True):
        lines = site.path.read_text().splitlines()
        first = lines[site.start]
        indent = first[: len(first) - len(first.lstrip())]
        lines.insert(site.end - 1, f"{indent}// @end {site.name}")
        lines.insert(site.start, f"{indent}// {site.header()}")
        sources.write(site.path, "\n".join(lines) + "\n")


@contextmanager
def annotated_copy(sources: Path, anchors) -> Iterator[SourceTree]:
    """`sources` as a scratch tree of theirs holds them, parsed: themselves
    when no site is anchored, else an annotated copy, removed after."""
    if not anchors:
        yield SourceTree(sources)
        return
    with tempfile.TemporaryDirectory(prefix="faults-annotated-") as folder:
        copy = SourceTree(Path(folder) / "sources")
        shutil.copytree(sources, copy.root)
        annotate(copy, anchors)
        yield copy
