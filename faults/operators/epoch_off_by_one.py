"""epoch-off-by-one: a wait's expected epoch or count one off."""

from faults.operators.operator import Example, Made, Operator

OPERATOR = Operator(
    rank=11,
    word="epoch-off-by-one",
    does="the wait expects the epoch (or count) one off: last step's flag passes it",
    made=Made.REWRITE,
    bug_class=True,
    hint="the data was there when the consumer looked: make the consumer wait on a late producer "
    "(host-side launch skew, or delay the guarded store) and make each step's data differ from "
    "the last",
    examples=(
        Example("wait", "  wait_until(flag, epoch, \"x\");\n",
                "  wait_until(flag, epoch - 1, \"x\");\n"),
    ),
)
