"""The bug corpus (corpus/afdep): every bug the static review must catch is
caught by it, with no GPU, naming the bug's site (docs/review.md, "The
bug corpus"). Bugs only a run can show are reviewed on a GPU machine by
`afdep-faults corpus corpus/afdep --run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.corpus.bugs import (
    BugResult,
    Catch,
    CaughtBy,
    bug_commit,
    load_corpus,
    review_bug,
    review_sarif,
)
from faults.review.findings import (
    BASE_CONTRACT,
    CONTRACT,
    CONTRACT_CHANGED,
    NO_LONGER_APPLIES,
    SITE_GONE,
    UNCOVERED,
    UNSITED,
)
from invariants.sync.sites import parse_tree

REPO = Path(__file__).parents[4]
CORPUS = load_corpus(REPO / "corpus/afdep")
KNOWN_SITES = {site.name for site in parse_tree(REPO / "afdep/csrc")[0]}
STATIC_RULES = (
    CONTRACT, CONTRACT_CHANGED, BASE_CONTRACT, UNSITED, SITE_GONE, NO_LONGER_APPLIES, UNCOVERED
)
STATIC_ERRORS = {(rule.id, "error") for rule in STATIC_RULES}


def test_the_corpus_spans_the_bug_classes():
    assert len(CORPUS) >= 20
    assert len({bug.bug_class for bug in CORPUS}) >= 8
    assert {bug.site for bug in CORPUS} <= KNOWN_SITES


@pytest.mark.skipif(
    not (REPO / ".git").exists(), reason="the corpus is committed on a clone of HEAD"
)
@pytest.mark.parametrize(
    "bug", [b for b in CORPUS if b.catch is Catch.STATIC], ids=lambda bug: bug.name
)
def test_the_static_review_catches_the_bug_at_its_site(bug, tmp_path):
    base, head = bug_commit(REPO, bug, tmp_path / "clone")
    static = review_bug(
        tmp_path / "clone", base, head, tmp_path, run=False, known_sites=KNOWN_SITES
    )
    log = Path(static.log).read_text()
    assert static.exit_code == 1, log
    # CHANGES NEEDED, as its SARIF says it: a static review's findings, each
    # an error (a review with none is ok; HARNESS BROKEN needs --run)
    document = json.loads(review_sarif(tmp_path, run=False).read_text())
    rules = {(r["ruleId"], r["level"]) for r in document["runs"][0]["results"]}
    assert rules and rules <= STATIC_ERRORS, log
    assert bug.site in static.sites_named, log
    assert BugResult(bug, static).caught_by is CaughtBy.STATIC
