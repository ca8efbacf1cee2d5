"""One review: what the change touches, what the static contract and the runs
said, and the verdict that follows (docs/review.md, "The pre-merge review")."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from faults.catalog.refs import DroppedAnchor
from faults.review.contracts import ContractChange
from faults.review.coverage import Coverage
from faults.review.runs import RunReport
from faults.review.static import ContractCheck
from invariants.sync.finding import Finding


class ReviewVerdict(str, Enum):
    OK = "ok"
    CHANGES_NEEDED = "CHANGES NEEDED"
    # The harness cannot judge: BASE's tree fails too, or the forced failure
    # is not seen. Not the change's fault, and not a pass either.
    HARNESS_BROKEN = "HARNESS BROKEN"

    def __str__(self) -> str:
        return self.value


OLDER_TREE_OPENING = "Judged by `"  # how the review's line on an older tree opens


@dataclass
class OlderTree:
    """An older tree judged by a catalog not its own (review --older-trees)."""

    catalog: str  # the catalog that judged it
    refused: str  # why the tree's own catalog could not
    left_out: list[str | DroppedAnchor]  # what that catalog names and the tree lacks

    def __str__(self) -> str:
        left = ", ".join(f"`{name}`" for name in self.left_out) or "nothing"
        return (
            f"{OLDER_TREE_OPENING}{self.catalog}`, the tree's own catalog refused "
            f"({self.refused}); left out as naming sites the tree lacks: {left}."
        )


class SiteLoss(str, Enum):
    """How a site of BASE is no longer a site of the change's tree."""

    GONE = "gone from the change's tree (its `// @site` lines or its anchor removed or renamed)"
    # A site-rule finding of the change names it: its `@end` or `@site`
    # missing, a site opened inside it, a guard naming it left dangling.
    BROKEN = "broken in the change's tree (a site-rule finding names it)"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class GoneSite:
    """A site of BASE the change's tree lacks, where BASE had it: a finding
    when the catalog names it, a site-rule finding names it, or a primitive
    it held is now outside every site."""

    name: str
    file: str | None  # BASE's, from the tree's root; None: BASE lacks it too
    line: int | None  # its first line in BASE (its `// @site` line, or its anchor's)
    how: SiteLoss

    @property
    def where(self) -> str:
        return "not in BASE either" if self.file is None else f"at BASE {self.file}:{self.line}"


@dataclass(frozen=True)
class LostEntry:
    """A catalog entry that no longer applies: the sites the change's tree
    lacks that it names (none: a mutation rule whose twin that tree cannot make)."""

    # a fault id, a `[generate]` key, `target.mutation #i (family)`, a [[target.site]]
    entry: str | DroppedAnchor
    sites: tuple[str, ...]

    def __str__(self) -> str:
        names = ", ".join(f"`{site}`" for site in self.sites)
        return f"`{self.entry}`" + (f" (names {names})" if names else "")


@dataclass
class Review:
    base: str
    change: str  # a ref, or "working tree"
    tree: Path  # the change's tree: the working tree, or CHANGE's scratch copy
    sources: str  # the catalog's sources, relative to the tree's root
    changed: dict[str, set[int]]  # file (relative to the sources) -> lines changed by CHANGE
    touched: list[Coverage]
    unsited: list[Finding]  # ordering primitives the change adds outside any site
    contract: ContractCheck
    runs: RunReport | None = None  # with --run
    older: OlderTree | None = None  # judged by a catalog not its own (--older-trees)
    # What the catalog names that the change's tree lacks (a site it removed,
    # renamed or left open): those entries no longer apply, a finding of the change.
    lost: list[LostEntry] = field(default_factory=list)
    gone: list[GoneSite] = field(default_factory=list)  # the sites the change broke
    # Sites whose declared contract the change changed, and what the change's
    # code breaks of BASE's contract there (docs/review.md, "Contracts across the change").
    contract_changes: list[ContractChange] = field(default_factory=list)
    held_to_base: list[Finding] = field(default_factory=list)
    # Seconds the whole review took, static half and runs (the command sets
    # it): with --run on a GPU, the figure of its benchmark.
    wall_s: float | None = None

    def lost_naming(self, site: str) -> list[str]:
        """The catalog entries that no longer apply because `site` is gone."""
        return [str(lost.entry) for lost in self.lost if site in lost.sites]

    def site_path(self, cover: Coverage) -> str:
        return cover.site.path.relative_to(self.tree).as_posix()

    def untouched_findings(self) -> list[Finding]:
        """Contract findings at sites the change does not touch: they count
        too, since a change can break a site it never edits (a barrier removed
        above a release's region, a shared header changing the PTX)."""
        touched = {cover.site.name for cover in self.touched}
        return [f for f in self.contract.findings if f.site not in touched]

    @property
    def static_ok(self) -> bool:
        return (
            not self.unsited
            and not self.lost
            and not self.gone
            and not self.contract_changes
            and not self.held_to_base
            and not any(cover.missing for cover in self.touched)
            and self.contract.ok
        )

    @property
    def verdict(self) -> ReviewVerdict:
        runs = self.runs
        if not self.static_ok or (runs is not None and runs.change_fails):
            return ReviewVerdict.CHANGES_NEEDED
        if runs is not None and runs.harness_broken:
            return ReviewVerdict.HARNESS_BROKEN
        if runs is not None and not runs.ok:
            return ReviewVerdict.CHANGES_NEEDED
        return ReviewVerdict.OK

    @property
    def ok(self) -> bool:
        return self.verdict is ReviewVerdict.OK
