"""remove-barrier: the CTA barrier before a block's publish, or after a block's wait, removed."""

from faults.operators.operator import Example, Litmus, Made, Operator

OPERATOR = Operator(
    rank=5,
    word="remove-barrier",
    does="the block barrier before the release (or after the wait) is removed",
    made=Made.REWRITE,
    weakens_order=True,
    bug_class=True,
    hint="the publishing group reached the release together: hold back a subset of its warps "
    "before their stores (uneven-delay) or make them wait for a marker the publisher sets after "
    "its release (forced-order)",
    litmus=Litmus(keeps_barrier=False),
    examples=(
        Example("release", "  __syncthreads();\n  if (threadIdx.x == 0) st_release_sys(flag, e);\n",
                "  \n  if (threadIdx.x == 0) st_release_sys(flag, e);\n"),
        Example("wait", "  wait_until(flag, epoch, \"x\");\n  __syncthreads();\n",
                "  wait_until(flag, epoch, \"x\");\n  \n"),
    ),
)
