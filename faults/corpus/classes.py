"""The classes of corpus bugs (docs/review.md, "The bug corpus"): the
mutation families' words where one fits (docs/operators.md, "Mutation
operators"), those whose operator says a real bug can be of it
(faults/operators/), and the words of bugs no generated fault makes."""

from __future__ import annotations

from faults.operators import BUG_FAMILIES, Word

OTHER_CLASSES = [
    ("REMOVE_WAIT", "remove-wait"),
    ("WRONG_PEER", "wrong-peer"),
    # A wait that covers only some of the peers it must wait for.
    ("SOME_PEERS", "some-peers"),
    ("WRONG_COUNT", "wrong-count"),
    ("BARRIER_UNDER_CONDITION", "barrier-under-condition"),
    ("DROPPED_ANNOTATION", "dropped-annotation"),
    ("UNBALANCED_ANNOTATION", "unbalanced-annotation"),
    # A wait that reads only part of what it waits for (one word of a vector).
    ("PARTIAL_WAIT", "partial-wait"),
    # A sentinel a real value can equal (a "not arrived" mark compared by value).
    ("WRONG_SENTINEL", "wrong-sentinel"),
    # A flag value reused before every reader has seen the one before (ABA).
    ("FLAG_REUSE", "flag-reuse"),
    # A site's declared contract weakened together with the code it required.
    ("WEAKEN_CONTRACT", "weaken-contract"),
    # Peer-written data read on the read-only path (ld.global.nc, __ldg) after the wait.
    ("NON_COHERENT_READ", "non-coherent-read"),
    # A load of the guarded data moved above the wait that orders it.
    ("READ_ABOVE_WAIT", "read-above-wait"),
    # A wait some of the consumers skip (whole blocks) while all of them read.
    ("WAIT_BY_SOME", "wait-by-some"),
]


# What a corpus bug does: the bug families' words first, in Family's order.
BugClass = Word(
    "BugClass",
    [(family.name, family.value) for family in BUG_FAMILIES] + OTHER_CLASSES,
    module=__name__,
    qualname="BugClass",
)
