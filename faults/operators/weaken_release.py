"""weaken-release: a release store (or reduction) made relaxed."""

from faults.operators.operator import Example, Litmus, Made, Operator

OPERATOR = Operator(
    rank=7,
    word="weaken-release",
    does="the release store or reduction is made relaxed: the data may land after the flag",
    made=Made.REWRITE,
    weakens_order=True,
    bug_class=True,
    hint="the hardware kept the stores in order although the weakened release allows otherwise: "
    "more repeats and larger sizes, and the static contract",
    litmus=Litmus(),
    examples=(
        Example("release", "  st_release_sys(flag, epoch);\n", "  st_relaxed_sys(flag, epoch);\n"),
        Example("release", "  red_add_release_sys(count, 1);\n",
                "  red_add_relaxed_sys(count, 1);\n"),
    ),
)
