"""How far a value, or the condition a barrier lies under, can differ between
the threads of a block, and which barriers that makes partial: a barrier some
threads of its group skip is no barrier for them (docs/synchronization.md,
"The publish contract"). The source side (invariants/sync/thread_conditions.py)
and the PTX side (invariants/sync/ptx_divergence.py) both say it in these terms.
"""

from __future__ import annotations

from enum import IntEnum

from invariants.sync.sites import Group


class Spread(IntEnum):
    """How far a value can differ between the threads of a kernel, least first."""

    UNIFORM = 0  # alike in every thread of the grid (a kernel argument, gridDim)
    PER_BLOCK = 1  # alike in the threads of a block (blockIdx)
    PER_WARP = 2  # alike in the threads of a warp (the warp's index)
    PER_THREAD = 3  # differs from thread to thread (threadIdx, the lane)

    @property
    def said(self) -> str:
        """How a finding names it: `differs per warp`."""
        return "differs per " + self.name.removeprefix("PER_").lower()


def splits(spread: Spread, group: Group) -> bool:
    """Whether a condition of `spread` can send the threads of `group` two
    ways: a warp's threads part only on what differs within a warp, a
    block's on what differs within a block."""
    return group in PARTED_BY and spread >= PARTED_BY[group]


# The least spread that parts each group (a thread is never parted).
PARTED_BY = {
    Group.WARP: Spread.PER_THREAD,
    Group.BLOCK: Spread.PER_WARP,
    Group.GRID: Spread.PER_BLOCK,
}
