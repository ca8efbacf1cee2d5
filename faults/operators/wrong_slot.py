"""wrong-slot: a release writes its neighbour's flag."""

from faults.operators.operator import Example, Made, Operator

OPERATOR = Operator(
    rank=12,
    word="wrong-slot",
    does="the release writes the flag of the neighbouring slot, token or rank",
    made=Made.REWRITE,
    bug_class=True,
    hint="the neighbouring slot's flag came in time: delay the guarded store of some slots only, "
    "so neighbouring flags differ",
    examples=(
        Example("release", "  st_release_sys(flags + slot, epoch);\n",
                "  st_release_sys(flags + (slot ^ 1), epoch);\n"),
    ),
)
