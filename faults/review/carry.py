"""Anchored sites carried through a change (docs/review.md, "Anchored sites
across the change"): a site declared by the text it holds is found in BASE by
its anchors, and where the change rewrote that text (a release weakened to a
volatile store is a rewrite of the very text the anchor names) its region is
carried through the diff of its file, as blame maps lines, so the change's
code there is judged by the site's contract. A site is gone only when the
change deleted every line of its region."""

from __future__ import annotations

from dataclasses import replace
from difflib import SequenceMatcher
from pathlib import Path

from invariants.sync.sites import Anchor
from invariants.sync.statements import anchored_lines


def carry_lines(old: str, new: str, first: int, last: int) -> tuple[int, int] | None:
    """Where lines `first`..`last` (1-based) of `old` lie in `new`: from the
    first to the last line of `new` that keeps, replaces or is inserted among
    them (a block rewritten line for line maps line to line, so two sites on
    adjacent lines rewritten together stay two); None when the change
    deleted them all and put nothing there."""
    before, after = old.splitlines(), new.splitlines()
    mapped: list[int] = []
    start, stop = first - 1, last  # the region, 0-based, half open
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        lo, hi = max(i1, start), min(i2, stop)
        if tag == "insert":
            if start < i1 < stop:  # new lines inside the region belong to it
                mapped += range(j1, j2)
        elif lo < hi:
            if tag == "equal":
                mapped += range(j1 + lo - i1, j1 + hi - i1)
            elif tag == "replace" and i2 - i1 == j2 - j1:  # rewritten line for line
                mapped += range(j1 + lo - i1, j1 + hi - i1)
            elif tag == "replace":  # rewritten into another count of lines: all of them
                mapped += range(j1, j2)
    if not mapped:
        return None
    return min(mapped) + 1, max(mapped) + 1


def resolves(anchor: Anchor, sources: Path) -> tuple[int, int] | None:
    """The lines `anchor` declares in `sources`, or None where it is not found once."""
    path = Path(sources) / anchor.file
    try:
        text = path.read_text()
        return anchored_lines(
            text, anchor.file, begin=anchor.begin, end=anchor.end, at=anchor.at, after=anchor.after
        )
    except (OSError, ValueError):
        return None


def carried(anchors: tuple[Anchor, ...], base: Path, change: Path) -> tuple[Anchor, ...]:
    """Each anchor as the change's sources (`change`) hold it: as declared
    where its text is found there; else, where BASE's sources (`base`) hold
    it, its region carried through its file's diff (`Anchor.lines`); else as
    declared (its problem is said where it is resolved)."""
    kept = []
    for anchor in anchors:
        if resolves(anchor, change) is not None:
            kept.append(anchor)
            continue
        region = resolves(anchor, base)
        try:
            old = (Path(base) / anchor.file).read_text()
            new = (Path(change) / anchor.file).read_text()
        except OSError:  # its file gone, or never there
            kept.append(anchor)
            continue
        lines = carry_lines(old, new, *region) if region is not None else None
        kept.append(replace(anchor, lines=lines) if lines is not None else anchor)
    return tuple(kept)


def as_declared(anchors: tuple[Anchor, ...]) -> tuple[Anchor, ...]:
    """The anchors as the catalog declares them, their carried lines dropped (BASE is read so)."""
    return tuple(replace(anchor, lines=None) for anchor in anchors)
