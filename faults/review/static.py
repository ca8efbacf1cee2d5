"""The review's static half, with no GPU and no run: the publish contract of
every release and wait site, checked on the changed tree by invariants.sync.contract
(docs/review.md, "The pre-merge review")."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from faults.review.diff import ReviewError
from invariants.sync.contract import check_contracts
from invariants.sync.finding import Finding
from invariants.sync.ptx_read import PtxError
from invariants.sync.sites import SourceTree


@dataclass
class ContractCheck:
    """`declared` False: the catalog has no [target.contract], and the report
    says so (never a silent pass)."""

    declared: bool
    findings: list[Finding] = field(default_factory=list)  # files from the tree's root
    sites_checked: int = 0
    variants_checked: int = 0
    # Findings BASE's tree has too (the same site, variant and words): not
    # this change's, said apart and no reason for CHANGES NEEDED.
    pre_existing: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def at(self, site: str) -> list[Finding]:
        return [finding for finding in self.findings if finding.site == site]


def declares_contract(target) -> bool:
    return target.contract is not None


def check_contract(
    tree: Path, target, sources: Path | SourceTree | None = None
) -> ContractCheck:
    """Every site contract of `tree` (its sources, else `sources`: a folder,
    or sources parsed already), on the sources and on the PTX the target's
    compiler emits. PTX that cannot be made or read stops the review with one
    line naming it (exit 2), never a silent pass."""
    if not declares_contract(target):
        return ContractCheck(declared=False)
    try:
        elsewhere = {} if sources is None else {"sources": sources}
        report = check_contracts(tree, target, ptx=True, **elsewhere)
    except PtxError as error:
        raise ReviewError(f"the changed tree's PTX: {error}") from None
    findings = [violation.from_root(tree) for violation in report.violations]
    return ContractCheck(True, findings, report.sites_checked, report.variants_checked)


def without_pre_existing(check: ContractCheck, base: ContractCheck | None) -> ContractCheck:
    """`check` (the change's) with each finding BASE's `base` has too (the
    same site, variant and message: a line may move) set apart as
    pre-existing; as it is when BASE could not be checked."""
    if base is None or not check.findings:
        return check
    had = {(f.site, f.variant, f.message) for f in base.findings}
    new = [f for f in check.findings if (f.site, f.variant, f.message) not in had]
    old = [f for f in check.findings if (f.site, f.variant, f.message) in had]
    return replace(check, findings=new, pre_existing=old)


def base_contract(tree: Path, target, sources: SourceTree) -> ContractCheck | None:
    """BASE's contract (`sources`: its tree's, parsed already), to tell the
    change's findings from those it inherited; None where BASE's PTX cannot
    be made (nothing is set apart)."""
    try:
        return check_contract(tree, target, sources)
    except ReviewError:
        return None
