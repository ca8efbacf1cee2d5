"""N logical ranks in one process on one GPU: their buffers, built together
with no torch.distributed (afdep.ranks.LocalWorld), a stream each, and the
check that their kernels can all be resident at once (afdep.residency).
The kernels are the ones a rank per GPU runs: only the peer table differs
(docs/synchronization.md, "One GPU, logical ranks")."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from afdep.buffer import Buffer
from afdep.config import Settings
from afdep.ranks import MAX_LOGICAL_RANKS, LocalWorld
from afdep.residency import Residency, check_residency
from afdep.workspace import Geometry


@dataclass
class LogicalRanks:
    buffers: list[Buffer]  # in rank order: attention ranks, then FFN ranks
    streams: list[torch.cuda.Stream]  # rank r's launches go on streams[r]
    residency: Residency

    @property
    def world_size(self) -> int:
        return len(self.buffers)

    @property
    def geometry(self) -> Geometry:
        return self.buffers[0].geometry


def logical_ranks(
    world_size: int,
    *,
    environs: Sequence[Mapping[str, str]] | None = None,
    device_index: int | None = None,
    **buffer_kwargs,
) -> LogicalRanks:
    """Build `world_size` logical ranks' buffers on one GPU. `environs[r]` is
    the environment rank r reads its `AFDEP_*` knobs from (default: this
    process's); the ranks must agree on the protocol knobs as NVLink ranks must.
    Raises ValueError for a world size out of range, RankFailures when a rank's
    construction raised (each rank's error), ResidencyError when the kernels of a
    step cannot all be resident."""
    if not isinstance(world_size, int) or not 2 <= world_size <= MAX_LOGICAL_RANKS:
        raise ValueError(
            f"logical ranks: world_size must be 2..{MAX_LOGICAL_RANKS}, got {world_size!r}"
        )
    environs = list(environs) if environs is not None else [os.environ] * world_size
    if len(environs) != world_size:
        raise ValueError(f"logical ranks: {len(environs)} environments for {world_size} ranks")
    device_index = torch.cuda.current_device() if device_index is None else device_index

    def build(group) -> Buffer:
        torch.cuda.set_device(device_index)  # the CUDA device is per thread
        config = Settings.from_env(environs[group.rank])
        return Buffer(group, config=config, **buffer_kwargs)

    buffers = LocalWorld(world_size).run(build)
    # The kernels were loaded on the ranks' threads; this thread launches them.
    from cuda.core import Device

    torch.cuda.set_device(device_index)
    Device(device_index).set_current()
    first = buffers[0]
    sm_count = torch.cuda.get_device_properties(device_index).multi_processor_count
    fit = check_residency(first.geometry, first.protocols, first.expand_ctas, sm_count)
    streams = [torch.cuda.Stream(device=device_index) for _ in buffers]
    return LogicalRanks(buffers, streams, fit)
