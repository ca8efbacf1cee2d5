"""A contract finding BASE's tree has too is not the change's
(faults/review/static.py): set apart as pre-existing, a warning of the
SARIF, and no reason for CHANGES NEEDED; a finding new to the change stays."""

from __future__ import annotations

from dataclasses import replace

from faults.review.static import ContractCheck, without_pre_existing
from invariants.sync.finding import Finding

OLD = Finding("k.cuh", 12, "reads the data it guards before any acquire", "k.wait", "harness.cu")
NEW = Finding("k.cuh", 40, "publish is st.relaxed.gpu: no release at scope gpu", "k.release", "harness.cu")


def test_a_finding_base_has_too_is_pre_existing_even_where_its_line_moved():
    change = ContractCheck(True, [replace(OLD, line=15), NEW], 3, 1)
    base = ContractCheck(True, [OLD], 3, 1)
    split = without_pre_existing(change, base)
    assert [(f.site, f.line) for f in split.findings] == [("k.release", 40)]
    assert [(f.site, f.line) for f in split.pre_existing] == [("k.wait", 15)]
    assert not split.ok


def test_the_same_site_saying_other_words_is_new():
    other = Finding("k.cuh", 12, "no ld.acquire.gpu in the wait", "k.wait", "harness.cu")
    split = without_pre_existing(ContractCheck(True, [other], 3, 1), ContractCheck(True, [OLD], 3, 1))
    assert (split.findings, split.pre_existing) == ([other], [])


def test_base_unchecked_sets_nothing_apart():
    change = ContractCheck(True, [OLD], 3, 1)
    assert without_pre_existing(change, None) == change
    assert without_pre_existing(ContractCheck(True, [], 3, 1), ContractCheck(True, [OLD])).ok
