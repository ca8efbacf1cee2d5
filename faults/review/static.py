"""The review's static half, with no GPU and no run: the publish contract of
every release and wait site, checked on the changed tree by faults.contract
(docs/architecture.md, "The pre-merge review")."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

CONTRACT_MODULE = "faults.contract"


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
    """`available` False: this installation has no contract checker, and the
    report says so (never a silent pass)."""

    available: bool
    findings: list[ContractFinding] = field(default_factory=list)
    sites_checked: int = 0
    variants_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def at(self, site: str) -> list[ContractFinding]:
        return [finding for finding in self.findings if finding.site == site]


def tree_relative(path: Path, tree: Path) -> str:
    """A checker's path as the review names it: relative to the tree's root."""
    path = Path(path)
    if path.is_absolute():
        try:
            return path.resolve().relative_to(tree.resolve()).as_posix()
        except ValueError:
            return path.as_posix()
    return path.as_posix()


def check_contract(tree: Path, target) -> ContractCheck:
    """Every site contract of `tree`, on the sources and on the PTX the
    target's compiler emits. A checker that is absent is said, not skipped
    silently; one that is present but broken raises."""
    try:
        contract = importlib.import_module(CONTRACT_MODULE)
    except ModuleNotFoundError as error:
        if error.name != CONTRACT_MODULE:
            raise  # the checker is there and imports something missing: not ours to hide
        return ContractCheck(available=False)
    report = contract.check_contracts(tree, target, ptx=True)
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
