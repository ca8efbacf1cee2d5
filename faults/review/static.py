"""The review's static half, with no GPU and no run: the publish contract of
every release and wait site, checked on the changed tree by invariants.sync.contract
(docs/review.md, "The pre-merge review")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from faults.review.diff import ReviewError
from invariants.sync.contract import check_contracts
from invariants.sync.finding import Finding
from invariants.sync.ptx_read import PtxError


@dataclass
class ContractCheck:
    """`declared` False: the catalog has no [target.contract], and the report
    says so (never a silent pass)."""

    declared: bool
    findings: list[Finding] = field(default_factory=list)  # files from the tree's root
    sites_checked: int = 0
    variants_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def at(self, site: str) -> list[Finding]:
        return [finding for finding in self.findings if finding.site == site]


def declares_contract(target) -> bool:
    return target.contract is not None


def check_contract(tree: Path, target, sources: Path | None = None) -> ContractCheck:
    """Every site contract of `tree` (its sources, else `sources`), on the
    sources and on the PTX the target's compiler emits. PTX that cannot be
    made or read stops the review with one line naming it (exit 2), never a
    silent pass."""
    if not declares_contract(target):
        return ContractCheck(declared=False)
    try:
        elsewhere = {} if sources is None else {"sources": sources}
        report = check_contracts(tree, target, ptx=True, **elsewhere)
    except PtxError as error:
        raise ReviewError(f"the changed tree's PTX: {error}") from None
    findings = [violation.from_root(tree) for violation in report.violations]
    return ContractCheck(True, findings, report.sites_checked, report.variants_checked)
