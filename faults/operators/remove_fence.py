"""remove-fence: the fence before a relaxed publish removed."""

from faults.operators.operator import Example, Litmus, Made, Operator

OPERATOR = Operator(
    rank=9,
    word="remove-fence",
    does="the fence that orders the stores before a relaxed publish is removed",
    made=Made.REWRITE,
    weakens_order=True,
    bug_class=True,
    hint="the stores became visible in order without the fence in these runs: more repeats and "
    "larger sizes, and the static contract",
    litmus=Litmus(),
    examples=(
        Example("release", "  ptx::fence_acq_rel_sys();\n  red_add_relaxed_sys(count, 1);\n",
                "  \n  red_add_relaxed_sys(count, 1);\n"),
    ),
)
