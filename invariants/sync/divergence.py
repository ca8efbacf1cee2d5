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
    """How far a value can differ between the threads of a block, least first."""

    UNIFORM = 0  # alike in every thread of the block (blockIdx, a kernel argument)
    PER_WARP = 1  # alike in the threads of a warp (the warp's index)
    PER_THREAD = 2  # differs from thread to thread (threadIdx, the lane)

    @property
    def said(self) -> str:
        """How a finding names it: `differs per warp`."""
        return "differs per " + self.name.removeprefix("PER_").lower()


def splits(spread: Spread, group: Group) -> bool:
    """Whether a condition of `spread` can send the threads of `group` two
    ways: a warp's threads part only on what differs within a warp."""
    if group == Group.THREAD:
        return False
    if group == Group.WARP:
        return spread >= Spread.PER_THREAD
    return spread >= Spread.PER_WARP
