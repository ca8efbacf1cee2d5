"""faults/corpus/classes.py: a corpus bug's class words, the mutation
families' words among them (the corpus files store these words)."""

from __future__ import annotations

from faults.corpus.classes import BugClass
from faults.operators import BUG_FAMILIES, Family


def test_the_class_words_are_these_in_this_order():
    # The families a real bug can be first (their operators say so), then the others.
    assert [f.value for f in BUG_FAMILIES][:9] == [
        "remove-barrier", "remove-warp-sync", "weaken-release", "weaken-acquire",
        "remove-fence", "narrow-scope", "epoch-off-by-one", "wrong-slot", "publish-early",
    ]  # fmt: skip
    assert [c.value for c in BugClass] == [f.value for f in BUG_FAMILIES] + [
        "remove-wait", "wrong-peer", "some-peers", "wrong-count", "barrier-under-condition",
        "dropped-annotation", "unbalanced-annotation", "partial-wait", "wrong-sentinel",
        "flag-reuse", "weaken-contract", "non-coherent-read", "read-above-wait", "wait-by-some",
    ]  # fmt: skip
    assert (BugClass.PUBLISH_EARLY, str(BugClass.WRONG_SLOT)) == ("publish-early", "wrong-slot")


def test_a_family_class_is_the_familys_word():
    shared = [c for c in BugClass if c.value in {f.value for f in Family}]
    assert [(c.name, c.value) for c in shared] == [
        (Family(c.value).name, Family(c.value).value) for c in shared
    ]
    assert len(shared) == len(BUG_FAMILIES) >= 9
