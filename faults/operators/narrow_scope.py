"""narrow-scope: a release or acquire at system scope made gpu-scoped."""

from faults.operators.operator import Example, Litmus, Made, Operator

OPERATOR = Operator(
    rank=10,
    word="narrow-scope",
    does="the release or acquire is made at gpu scope where peers on other GPUs read or write",
    made=Made.REWRITE,
    weakens_order=True,
    bug_class=True,
    hint="a narrower scope was enough on this machine's interconnect in these runs: the static "
    "contract is the catch",
    litmus=Litmus(wait="acquire.gpu", narrows_release=True),
    examples=(
        Example("release", "  st_release_sys(flag, epoch);\n", "  st_release_gpu(flag, epoch);\n"),
        Example("release", "  ptx::fence_acq_rel_sys();\n", "  ptx::fence_acq_rel_gpu();\n"),
        Example("wait", "  wait_until(flag, epoch, \"x\");\n",
                "  wait_until_gpu(flag, epoch, \"x\");\n"),
    ),
)
