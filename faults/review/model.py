"""One review: what the change touches, what the static contract and the runs
said, and the verdict that follows (docs/review.md, "The pre-merge review")."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

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
    left_out: list[str]  # what that catalog names and the tree lacks

    def __str__(self) -> str:
        left = ", ".join(f"`{name}`" for name in self.left_out) or "nothing"
        return (
            f"{OLDER_TREE_OPENING}{self.catalog}`, the tree's own catalog refused "
            f"({self.refused}); left out as naming sites the tree lacks: {left}."
        )


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
    # What the catalog names that the change's tree lacks (a site it removed
    # or renamed): those faults no longer apply, a finding of the change.
    lost: list[str] = field(default_factory=list)
    # Seconds the whole review took, static half and runs (the command sets
    # it): with --run on a GPU, the figure of its benchmark.
    wall_s: float | None = None

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
