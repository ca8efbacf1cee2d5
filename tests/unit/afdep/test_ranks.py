"""afdep.ranks on the CPU: the logical ranks' peer table and workspace slices,
their in-process collectives, and the config agreement run through them
(docs/synchronization.md, "One GPU, logical ranks")."""

from __future__ import annotations

import threading

import pytest
import torch

from afdep.buffer import agree_on_config
from afdep.config import Settings, ConfigError
from afdep.ranks import (
    SLICE_ALIGN,
    LocalRankGroup,
    LocalWorld,
    Meeting,
    RankFailures,
    TorchRankGroup,
    logical_allocation_bytes,
    logical_peer_bases,
    mode_for_gpus,
    rank_group,
    rank_mode_label,
    slice_stride,
)
from hostio import RankMode

MIB = 1024 * 1024


def test_the_peer_table_from_a_fake_base_address():
    base = 0x7F00_0010_0000  # 1 MiB past a 2 MiB boundary: the first slice starts at the next
    assert logical_peer_bases(base, 300_000, 4) == [
        0x7F00_0020_0000,
        0x7F00_0040_0000,
        0x7F00_0060_0000,
        0x7F00_0080_0000,
    ]
    # A workspace over 2 MiB takes the next multiple: every rank sees the same table.
    assert logical_peer_bases(0x7F00_0000_0000, 2 * MIB + 1, 3) == [
        0x7F00_0000_0000,
        0x7F00_0040_0000,
        0x7F00_0080_0000,
    ]


def test_slice_stride_and_allocation_size():
    assert SLICE_ALIGN == 2 * MIB
    assert slice_stride(1) == 2 * MIB and slice_stride(2 * MIB) == 2 * MIB
    assert slice_stride(2 * MIB + 1) == 4 * MIB
    assert logical_allocation_bytes(300_000, 4) == 4 * 2 * MIB + 2 * MIB


def workspaces(world_size: int, nbytes: int):
    def body(group: LocalRankGroup):
        workspace = group.symmetric_workspace(nbytes, torch.device("cpu"))
        workspace.local.fill_(group.rank + 1)
        group.barrier()  # every rank has written its slice
        return workspace

    return LocalWorld(world_size).run(body)


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_each_rank_has_its_own_aligned_slice_of_one_allocation(world_size):
    nbytes = 300_000
    spaces = workspaces(world_size, nbytes)
    whole = spaces[0].keepalive
    assert all(space.keepalive is whole for space in spaces)  # one allocation
    table = spaces[0].peer_bases
    assert all(space.peer_bases == table for space in spaces)
    for rank, space in enumerate(spaces):
        assert space.local.data_ptr() == table[rank]
        assert space.local.numel() == nbytes
        assert table[rank] % SLICE_ALIGN == 0
    start, end = whole.data_ptr(), whole.data_ptr() + whole.numel()
    for rank in range(world_size - 1):
        assert table[rank] + nbytes <= table[rank + 1]  # no overlap
    assert start <= table[0] and table[-1] + nbytes <= end
    for rank in range(world_size):  # what rank r wrote is at table[r], and nowhere else
        offset = table[rank] - start
        assert torch.equal(whole[offset : offset + nbytes], torch.full((nbytes,), rank + 1).byte())


def test_all_gather_returns_every_rank_in_rank_order():
    gathered = LocalWorld(3).run(lambda group: group.all_gather_object(f"r{group.rank}"))
    assert gathered == [["r0", "r1", "r2"]] * 3


def test_no_two_ranks_run_host_code_at_once():
    inside, overlaps = [0], []
    lock = threading.Lock()

    def body(group):
        for _ in range(3):
            with lock:
                inside[0] += 1
                overlaps.append(inside[0])
            with lock:
                inside[0] -= 1
            group.barrier()
        return group.rank

    assert LocalWorld(4).run(body) == [0, 1, 2, 3]
    assert max(overlaps) == 1


def test_a_disagreement_fails_on_every_logical_rank():
    configs = [Settings(), Settings(ungate=True)]

    def body(group):
        agree_on_config(group, configs[group.rank])

    with pytest.raises(RankFailures) as caught:
        LocalWorld(2).run(body)
    message = (
        "all ranks must use the same count-first configuration: "
        "AFDEP_COUNT_FIRST_UNGATE differs (rank 0: False, rank 1: True)"
    )
    assert [(f.rank, type(f.error), str(f.error)) for f in caught.value.failures] == [
        (0, ConfigError, message),
        (1, ConfigError, message),
    ]
    assert str(caught.value) == f"logical rank 0: ConfigError: {message}"
    assert "ConfigError" in caught.value.failures[1].trace


def test_agreement_passes_when_only_other_knobs_differ():
    configs = [Settings(timeout_ms=1000), Settings(timeout_ms=2000)]
    assert LocalWorld(2).run(lambda group: agree_on_config(group, configs[group.rank])) == [
        None,
        None,
    ]


def test_a_rank_that_raises_stops_its_peers_at_their_next_collective():
    def body(group):
        if group.rank == 1:
            raise ValueError("rank 1 cannot build")
        group.barrier()

    with pytest.raises(RankFailures) as caught:
        LocalWorld(3).run(body)
    kinds = [(f.rank, type(f.error).__name__) for f in caught.value.failures]
    assert kinds == [(0, "BrokenBarrierError"), (1, "ValueError"), (2, "BrokenBarrierError")]
    assert str(caught.value) == "logical rank 1: ValueError: rank 1 cannot build"


def test_rank_group_keeps_a_group_and_needs_torch_distributed_otherwise():
    group = LocalRankGroup(LocalWorld(2), 1)
    assert rank_group(group) is group
    assert group.shares_device and not TorchRankGroup.shares_device  # the epilogue's SMs
    with pytest.raises(
        RuntimeError, match=r"^afdep.Buffer needs torch.distributed to be initialized$"
    ):
        TorchRankGroup()


def test_rank_mode_labels():
    assert rank_mode_label(RankMode.LOGICAL, 2, "NVIDIA H200") == "1xH200, 2 logical ranks"
    assert rank_mode_label(RankMode.PER_GPU, 4, "NVIDIA H200 NVL") == "4xH200, 4 NVLink ranks"


def test_a_break_after_a_meeting_completed_does_not_reach_its_waiters():
    for _ in range(20):  # threading.Barrier loses this race now and then
        meeting, outcomes = Meeting(2, 5.0), []

        def waiter(meeting=meeting, outcomes=outcomes):
            try:
                meeting.wait()
                outcomes.append("met")
            except threading.BrokenBarrierError:
                outcomes.append("broken")

        thread = threading.Thread(target=waiter)
        thread.start()
        meeting.wait()
        meeting.abort()
        thread.join()
        assert outcomes == ["met"]
        with pytest.raises(threading.BrokenBarrierError):
            meeting.wait()  # a later meeting is broken


def test_a_meeting_nobody_else_reaches_times_out_broken():
    with pytest.raises(threading.BrokenBarrierError):
        Meeting(2, 0.05).wait()


def test_the_mode_follows_the_gpus_seen():
    assert mode_for_gpus(2, 2) == RankMode.PER_GPU
    assert mode_for_gpus(8, 4) == RankMode.PER_GPU
    assert mode_for_gpus(1, 2) == RankMode.LOGICAL
    assert mode_for_gpus(2, 4) == RankMode.LOGICAL
    with pytest.raises(ValueError, match=r"^2 ranks need a GPU, found 0$"):
        mode_for_gpus(0, 2)
