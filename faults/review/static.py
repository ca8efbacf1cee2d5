"""The review's static half, with no GPU and no run: the publish contract of
every release and wait site, checked on the changed tree by invariants.sync.contract
(docs/architecture.md, "The pre-merge review")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from faults.review.diff import ReviewError
from invariants.sync.contract import check_contracts, tree_relative
from invariants.sync.ptx_read import PtxError


@dataclass(frozen=True)
class Located:
    """A finding at a file:line of the changed tree (path relative to its root)."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class ContractFinding:
    site: str
    where: Located  # message: what is missing, the kernel variant first when the PTX showed it


@dataclass
class ContractCheck:
    """`declared` False: the catalog has no [target.contract], and the report
    says so (never a silent pass)."""

    declared: bool
    findings: list[ContractFinding] = field(default_factory=list)
    sites_checked: int = 0
    variants_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def at(self, site: str) -> list[ContractFinding]:
        return [finding for finding in self.findings if finding.site == site]


def declares_contract(target) -> bool:
    return target.contract is not None


def check_contract(tree: Path, target) -> ContractCheck:
    """Every site contract of `tree`, on the sources and on the PTX the
    target's compiler emits. PTX that cannot be made or read stops the review
    with one line naming it (exit 2), never a silent pass."""
    if not declares_contract(target):
        return ContractCheck(declared=False)
    try:
        report = check_contracts(tree, target, ptx=True)
    except PtxError as error:
        raise ReviewError(f"the changed tree's PTX: {error}") from None
    findings = [
        ContractFinding(
            violation.site,
            Located(
                tree_relative(violation.path, tree),
                violation.line,
                f"{violation.site}"
                + (f" [{violation.variant}]" if violation.variant else "")
                + f": {violation.missing}",
            ),
        )
        for violation in report.violations
    ]
    return ContractCheck(True, findings, report.sites_checked, report.variants_checked)
