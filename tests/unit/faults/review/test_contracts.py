"""faults/review/contracts.py: a site's declared contract across the change
(docs/review.md, "Contracts across the change"), from in-memory trees, and
through the review of the CPU fixture's repository."""

from __future__ import annotations

from pathlib import Path

from faults.review.contracts import ContractChange, contract_changes
from faults.review.model import ReviewVerdict
from invariants.sync.finding import Finding
from invariants.sync.sites import parse_tree
from tests.unit.faults.review.test_review import MAIN_CPP, fixture_repo, review

KERNEL = """\
__global__ void k(unsigned long long* flag, int* data) {
  // @site x.wait kind=wait consumers=%s scope=sys guards=x.store
  if (threadIdx.x == 0) wait_until(flag, 1);
  %s
  // @end x.wait
  // @site x.store kind=store
  data[threadIdx.x] = 1;
  // @end x.store
}
"""


def tree(root: Path, consumers: str, barrier: str = "__syncthreads();") -> list:
    (root / "k.cuh").parent.mkdir(parents=True, exist_ok=True)
    (root / "k.cuh").write_text(KERNEL % (consumers, barrier))
    return parse_tree(root)[0]


def test_a_weakened_wait_is_named_old_to_new_at_its_line(tmp_path):
    base = tree(tmp_path / "base" / "src", "block")
    change = tree(tmp_path / "change" / "src", "thread", "")
    [found] = contract_changes(base, change, tmp_path / "change")
    assert found == ContractChange(
        "x.wait",
        "src/k.cuh",
        2,
        (("kind", "wait"), ("producers", ""), ("consumers", "block"), ("scope", "sys"),
         ("guards", "x.store")),
        (("kind", "wait"), ("producers", ""), ("consumers", "thread"), ("scope", "sys"),
         ("guards", "x.store")),
    )  # fmt: skip
    assert found.fields == ["consumers"]
    assert found.finding() == Finding(
        "src/k.cuh", 2, "its contract changed: consumers=block -> thread", "x.wait"
    )


def test_a_change_inside_a_site_that_keeps_its_contract_changes_none(tmp_path):
    base = tree(tmp_path / "base", "block")
    change = tree(tmp_path / "change", "block", "__syncthreads();  // the block reads after it")
    assert contract_changes(base, change, tmp_path / "change") == []


def test_a_site_only_one_tree_has_is_not_a_changed_contract(tmp_path):
    base = tree(tmp_path / "base", "block")
    assert contract_changes(base, [], tmp_path) == []
    assert contract_changes([], base, tmp_path / "base") == []


def test_the_fixtures_wait_declared_another_scope_is_changes_needed(tmp_path):
    """The fixture declares no [target.contract]: the declared change alone is the finding."""
    repo = fixture_repo(tmp_path)
    path = repo / MAIN_CPP
    text = path.read_text()
    old = "kind=wait consumers=thread scope=sys guards=fx.producer.payload_store"
    assert old in text
    path.write_text(text.replace(old, old.replace("scope=sys", "scope=gpu")))
    status, result = review(repo)
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
    assert [c.finding() for c in result.contract_changes] == [
        Finding(MAIN_CPP, 48, "its contract changed: scope=sys -> gpu", "fx.consumer.flag_wait")
    ]
    assert result.held_to_base == []  # no contract declared: nothing to hold it to
