"""invariants/sync/thread_conditions.py: how far what a function returns
spreads does not depend on which call reached it first."""

from __future__ import annotations

import pytest

from invariants.sync.divergence import Spread
from invariants.sync.thread_conditions import DEPTH, Condition, ThreadConditions

LANE = """\
__device__ int lane() {
  int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
"""


def chain(length: int) -> str:
    """c<length> calls c<length - 1> ... calls c0, which calls lane()."""
    links = ["__device__ int c0() { return lane(); }"]
    links += [f"__device__ int c{n}() {{ return c{n - 1}(); }}" for n in range(1, length + 1)]
    return "\n".join(links) + "\n"


@pytest.mark.parametrize("deep_first", [True, False])
def test_a_function_first_reached_past_the_depth_is_still_weighed_when_called_near(
    tmp_path, deep_first
):
    kernel = (
        LANE
        + chain(DEPTH - 1)
        + "__global__ void k() {\n"
        + f"  if (c{DEPTH - 1}() == 0) __syncwarp();\n"  # lane() is DEPTH calls away
        + "  if (lane() == 0) __syncwarp();\n"
        + "}\n"
    )
    (tmp_path / "k.cuh").write_text(kernel)
    lines = kernel.splitlines()
    deep, near = [n for n, text in enumerate(lines, 1) if "__syncwarp" in text]
    conditions = ThreadConditions(tmp_path)
    order = [deep, near] if deep_first else [near, deep]
    found = {
        line: conditions.around(tmp_path / "k.cuh", line, lines[line - 1].index("__syncwarp"))
        for line in order
    }
    assert found == {
        deep: [Condition(f"if (c{DEPTH - 1}() == 0)", deep, Spread.UNIFORM)],  # not followed
        near: [Condition("if (lane() == 0)", near, Spread.PER_THREAD)],
    }
