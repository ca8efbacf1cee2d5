"""weaken-acquire: a wait's acquire load made relaxed."""

from faults.operators.operator import Example, Litmus, Made, Operator

OPERATOR = Operator(
    rank=8,
    word="weaken-acquire",
    does="the wait's acquire load is made relaxed: its reads may be served before the flag",
    made=Made.REWRITE,
    weakens_order=True,
    bug_class=True,
    hint="the reads were not hoisted above the relaxed flag load in these runs: more repeats "
    "and larger sizes, and the static contract",
    litmus=Litmus(wait="relaxed.sys"),
    examples=(
        Example("wait", "  wait_until(flag, epoch, \"x\");\n",
                "  wait_until_relaxed(flag, epoch, \"x\");\n"),
    ),
)
