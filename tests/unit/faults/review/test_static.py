"""The review's static contract, on the changed tree, through a stand-in for
invariants.sync.contract that keeps its interface (check_contracts(tree, target, *,
ptx, sources) -> a report of violations) and flags what the real checker must: a
publish with no release order, a wait with no acquire."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from faults.review import static
from faults.review.model import ReviewVerdict
from faults.review.static import ContractCheck
from invariants.sync.finding import Finding
from invariants.sync.sites import parse_tree
from tests.unit.faults.review.test_review import (
    MAIN_CPP,
    SRC,
    edit,
    fixture_repo,
    git,
    review,
    reviewed,
    touched,
)

RELEASE_LINE = 40  # main.cpp: channel.flag.store(...) in fx.producer.flag_release
WAIT_LINE = 49  # main.cpp: fixture::wait_until(...) in fx.consumer.flag_wait


@dataclass
class ContractReport:
    violations: list[Finding]
    sites_checked: int
    variants_checked: int

    @property
    def ok(self) -> bool:
        return not self.violations


def violations(tree: Path, sources: str) -> list[Finding]:
    """A release site must publish with release order (a source finding); the
    wait its helper header implements must load with acquire order (a
    compiled-code finding, reported under the variant `cpp`)."""
    found = []
    sites, _ = parse_tree(tree / sources)
    for site in sites:
        body = site.path.read_text().splitlines()[site.start : site.end - 1]
        if site.kind == "release" and not any("memory_order_release" in line for line in body):
            found.append(Finding(str(site.path), site.start + 1, "no release order", site.name))
        helper = (tree / sources / "common/wait.h").read_text()
        if site.kind == "wait" and "memory_order_acquire" not in helper:
            found.append(Finding(str(site.path), site.start + 1, "no ld.acquire", site.name, "cpp"))
    return found


@pytest.fixture
def repo(tmp_path) -> Path:
    return fixture_repo(tmp_path)


def install_contract(monkeypatch) -> list:
    """invariants.sync.contract replaced by the stand-in; returns its calls."""
    calls = []

    def check_contracts(
        tree_root: Path, catalog_target, *, ptx: bool = True, sources=None
    ) -> ContractReport:  # `sources`, parsed already by the review: read again here
        calls.append((Path(tree_root), catalog_target.name, ptx))
        found = violations(Path(tree_root), catalog_target.sources)
        return ContractReport(found, sites_checked=4, variants_checked=1)

    monkeypatch.setattr(static, "check_contracts", check_contracts)
    monkeypatch.setattr(static, "declares_contract", lambda target: True)
    return calls


@pytest.fixture
def contract(monkeypatch) -> list:
    return install_contract(monkeypatch)


def weaken_the_release(repo: Path) -> None:
    edit(repo, "std::memory_order_release);", "std::memory_order_relaxed);")


RELEASE_FINDING = Finding(MAIN_CPP, RELEASE_LINE, "no release order", "fx.producer.flag_release")


def test_a_violation_at_a_touched_site_is_changes_needed(repo, contract):
    weaken_the_release(repo)
    status, result = review(repo)
    assert status == 1
    # The working tree, with its PTX; then BASE's scratch tree, to tell its findings apart.
    assert contract[0] == (repo, "flag_payload", True)
    assert [(tree.name, tree.parent.name.startswith("review-base-")) for tree, *_ in contract[1:]] == [
        ("base", True)
    ]
    assert result.contract == ContractCheck(True, [RELEASE_FINDING], 4, 1)
    assert touched(result) == [("fx.producer.flag_release", "release", MAIN_CPP, 39, 41)]
    assert [cover.missing for cover in result.touched] == [[]]  # covered: the contract is wrong
    assert result.contract.at("fx.producer.flag_release") == [RELEASE_FINDING]
    assert result.untouched_findings() == []
    assert result.verdict is ReviewVerdict.CHANGES_NEEDED


def test_a_violation_at_a_site_the_change_does_not_touch_counts(repo, contract):
    """The change edits the wait's helper header, outside every site: the wait
    site in main.cpp keeps its text and loses its acquire."""
    path = repo / SRC / "common/wait.h"
    path.write_text(path.read_text().replace("memory_order_acquire", "memory_order_relaxed"))
    status, result = review(repo)
    assert status == 1
    assert result.touched == []
    assert result.unsited == []  # the contract alone
    assert result.untouched_findings() == [
        Finding(MAIN_CPP, WAIT_LINE, "no ld.acquire", "fx.consumer.flag_wait", "cpp")
    ]
    assert result.verdict is ReviewVerdict.CHANGES_NEEDED


def test_each_touched_site_says_its_contract(repo, contract):
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    edit(repo, "word_idx < kWords; ++word_idx) channel", "word_idx != kWords; ++word_idx) channel")
    status, result = review(repo)
    assert status == 0
    assert result.contract == ContractCheck(True, [], 4, 1)
    assert touched(result) == [
        ("fx.producer.payload_store", "store", MAIN_CPP, 36, 38),
        ("fx.consumer.flag_wait", "wait", MAIN_CPP, 48, 50),
    ]
    assert [cover.missing for cover in result.touched] == [[], []]  # both covered
    assert result.verdict is ReviewVerdict.OK


def test_the_changed_tree_of_a_commit_is_checked_not_the_working_tree(repo, contract):
    weaken_the_release(repo)
    git(repo, "commit", "-qam", "a relaxed publish")
    edit(repo, "std::memory_order_relaxed);", "std::memory_order_release);")  # not committed
    status, result = reviewed(["HEAD~1", "HEAD", "--root", str(repo)])
    assert status == 1
    assert [name for name, *_ in touched(result)] == ["fx.producer.flag_release"]
    assert result.contract.findings == [RELEASE_FINDING]
    (tree, _, _), (base, _, _) = contract  # the change's tree, then BASE's
    assert tree == repo.parent / "work/change"  # HEAD's archive, in the workdir
    assert base.name == "base"


def test_a_violation_base_has_too_is_pre_existing_not_the_changes(repo, contract):
    """BASE already publishes relaxed; the change edits the wait's loop
    bound only: the release's finding is BASE's, said apart, and the
    review approves what the change did."""
    weaken_the_release(repo)
    git(repo, "commit", "-qam", "base: a relaxed publish")
    edit(repo, "word_idx < kWords; ++word_idx) channel", "word_idx != kWords; ++word_idx) channel")
    status, result = review(repo)
    assert (result.contract.findings, result.contract.pre_existing) == ([], [RELEASE_FINDING])
    assert (status, result.verdict) == (0, ReviewVerdict.OK)
