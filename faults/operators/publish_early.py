"""publish-early: the release moved above the store site it guards."""

from faults.operators.operator import Made, Operator

OPERATOR = Operator(
    rank=13,
    word="publish-early",
    does="the release is moved above the store site it guards",
    made=Made.MOVE,
    weakens_order=True,
    bug_class=True,
    hint="the data landed before the consumer read it: delay the guarded store so the early "
    "flag runs ahead of it",
)
