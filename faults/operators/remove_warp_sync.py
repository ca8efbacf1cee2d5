"""remove-warp-sync: the warp barrier before a lane publishes, or after lane 0's wait, removed."""

from faults.operators.operator import Example, Litmus, Made, Operator

OPERATOR = Operator(
    rank=6,
    word="remove-warp-sync",
    does="the warp barrier before the release (or after the wait) is removed",
    made=Made.REWRITE,
    weakens_order=True,
    bug_class=True,
    hint="the warp reconverged before the release: a lane-level window may not exist on this "
    "hardware, the static contract is the catch",
    litmus=Litmus(keeps_barrier=False),
    examples=(
        Example("release", "  __syncwarp();\n  if (lane == 0) st_release_sys(flag, e);\n",
                "  \n  if (lane == 0) st_release_sys(flag, e);\n"),
    ),
)
