"""The review of a change to foreign sources whose sites a catalog declares
by anchors (tests/fixtures/flag_payload_anchored): the anchors are resolved
on each tree; one the change's tree no longer holds is a finding of the
change, not a catalog error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from faults.catalog.refs import DroppedAnchor
from faults.judge.verdict import Verdict
from faults.review.model import GoneSite, LostEntry, ReviewVerdict, SiteLoss
from faults.review.runs import CleanFailure
from tests.unit.faults.gitrepo import git
from tests.unit.faults.review.test_review import reviewed

SRC = "tests/fixtures/flag_payload_anchored"
FIXTURE = Path(__file__).parents[4] / SRC


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root / SRC)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return root


def review(repo: Path):
    return reviewed(["HEAD", "--root", str(repo), "--no-generated"], repo / SRC / "catalog.toml")


def edit(repo: Path, old: str, new: str) -> None:
    path = repo / SRC / "main.cpp"
    assert path.read_text().count(old) == 1
    path.write_text(path.read_text().replace(old, new))


def test_a_change_inside_an_anchored_site_touches_it(repo):
    edit(repo, "std::memory_order_release);", "std::memory_order_seq_cst);")
    status, result = review(repo)
    assert [(c.site.name, c.site.anchored, list(c.site.lines)) for c in result.touched] == [
        ("fx.producer.flag_release", True, [34]),
    ]
    assert (result.lost, result.unsited) == ([], [])


def test_an_anchor_whose_text_the_change_rewrites_is_carried_not_gone(repo):
    """The change rewrites the very text the release's anchor names: its
    region is carried through the diff (faults/review/carry.py), so the site
    is still there, touched and judged at its line, never "gone" (issue 49:
    flashinfer's real bug read as two sites gone)."""
    edit(repo, "channel.flag.store(round_idx + 1,", "channel.flag.exchange(round_idx + 1,")
    status, result = review(repo)
    assert (result.lost, result.gone, result.unsited) == ([], [], [])
    assert [(c.site.name, c.site.anchored, list(c.site.lines)) for c in result.touched] == [
        ("fx.producer.flag_release", True, [34]),
    ]


def test_an_anchored_site_whose_every_line_the_change_deletes_is_gone(repo):
    """Nothing to carry: the site is gone, named at its first line in BASE
    (its own line, no longer the one above it), and its entries no longer apply."""
    edit(repo, "  channel.flag.store(round_idx + 1, std::memory_order_release);\n", "")
    status, result = review(repo)
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
    anchor = DroppedAnchor(
        "fx.producer.flag_release",
        "target.site[1] (fx.producer.flag_release)",
        "at found 0 times in main.cpp",
    )
    assert result.lost == [
        LostEntry(anchor, ("fx.producer.flag_release",)),
        LostEntry("H1", ("fx.producer.flag_release",)),
    ]
    assert result.gone == [
        GoneSite("fx.producer.flag_release", f"{SRC}/main.cpp", 34, SiteLoss.GONE)
    ]
    assert result.unsited == []


def test_base_runs_with_the_anchors_it_holds_when_the_change_adds_one(repo):
    """The change adds an anchored site (its code and its [[target.site]])
    and fails the driver with no fault: BASE's tree runs clean to tell whose
    fault it is, with the anchors BASE's sources hold (not the new one), and
    the change is blamed, not the catalog (exit 1, not 2)."""
    edit(repo, "  int mismatches = 0;\n", "  int mismatches = 0;\n  mismatches += 1;\n")
    catalog = repo / SRC / "catalog.toml"
    new_site = '[[target.site]]\nname = "fx.consumer.bias"\nfile = "main.cpp"\n'
    new_site += 'at = "mismatches += 1;"\nkind = "compute"\n\n[target.bound]'
    catalog.write_text(catalog.read_text().replace("[target.bound]", new_site, 1))
    git(repo, "commit", "-qam", "head: a new anchored site, every round counted failed")
    words = ["HEAD~1", "HEAD", "--root", str(repo), "--no-generated", "--run"]
    status, result = reviewed(words, catalog, workdir="w")
    assert [c.site.name for c in result.touched] == ["fx.consumer.bias"]
    assert [(r.fault, r.config, r.verdict, r.ok) for r in result.runs.base_clean] == [
        ("control.clean", "default", Verdict.PASSED, True)
    ]
    log = repo.parent / "w/runs/change/control.clean/control.clean-default.log"
    said = "exit 1 with no line naming a failure; its last line: fixture rounds=4 failed=4"
    assert result.runs.change_fails == [CleanFailure("default", said, str(log))]
    assert result.runs.harness_broken == []
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
