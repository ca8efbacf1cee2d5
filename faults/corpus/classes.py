"""The classes of corpus bugs (docs/review.md, "The bug corpus")."""

from __future__ import annotations

from enum import Enum


class BugClass(str, Enum):
    """What a corpus bug does: the mutation families' words where one fits
    (docs/operators.md, "Mutation operators"), and those of bugs no generated
    fault makes."""

    REMOVE_BARRIER = "remove-barrier"
    REMOVE_WARP_SYNC = "remove-warp-sync"
    WEAKEN_RELEASE = "weaken-release"
    WEAKEN_ACQUIRE = "weaken-acquire"
    REMOVE_FENCE = "remove-fence"
    NARROW_SCOPE = "narrow-scope"
    EPOCH_OFF_BY_ONE = "epoch-off-by-one"
    WRONG_SLOT = "wrong-slot"
    PUBLISH_EARLY = "publish-early"
    REMOVE_WAIT = "remove-wait"
    WRONG_PEER = "wrong-peer"
    # A wait that covers only some of the peers it must wait for.
    SOME_PEERS = "some-peers"
    WRONG_COUNT = "wrong-count"
    BARRIER_UNDER_CONDITION = "barrier-under-condition"
    DROPPED_ANNOTATION = "dropped-annotation"
    UNBALANCED_ANNOTATION = "unbalanced-annotation"
    # A wait that reads only part of what it waits for (one word of a vector).
    PARTIAL_WAIT = "partial-wait"
    # A sentinel a real value can equal (a "not arrived" mark compared by value).
    WRONG_SENTINEL = "wrong-sentinel"
    # A flag value reused before every reader has seen the one before (ABA).
    FLAG_REUSE = "flag-reuse"

    def __str__(self) -> str:
        return self.value
