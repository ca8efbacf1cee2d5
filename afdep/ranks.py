"""A rank group's host-side collectives (config agreement, barriers, the
exchange of symmetric-workspace addresses), in two kinds: one rank per GPU
through torch.distributed (the NVLink mode), or N logical ranks on threads of
one process sharing one GPU (docs/synchronization.md, "One GPU, logical ranks").
torch loads on first use: the tools that only build commands import this too."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from afdep.workspace import align
from hostio import RankMode

# Each logical rank's slice starts on a 2 MiB boundary, as a per-rank
# symmetric-memory allocation does (the CUDA VMM granularity on sm_90).
SLICE_ALIGN = 2 * 1024 * 1024
MAX_LOGICAL_RANKS = 4  # the shapes 1A:1F .. 1A:3F; every rank's kernels must fit one GPU
BARRIER_TIMEOUT_S = 600.0  # a cold build compiles every kernel between two collectives

if TYPE_CHECKING:
    import torch

T = TypeVar("T")


def mode_for_gpus(gpus: int, ranks: int) -> RankMode:
    """The mode a tool picks from the GPUs it sees: a rank per GPU when there
    are enough, else every rank on one GPU; ValueError with none."""
    if gpus < 1:
        raise ValueError(f"{ranks} ranks need a GPU, found {gpus}")
    return RankMode.PER_GPU if gpus >= ranks else RankMode.LOGICAL


def rank_mode_label(mode: RankMode, ranks: int, gpu_name: str) -> str:
    """What results carry so one-GPU and NVLink results are never mixed:
    `1xH200, 2 logical ranks` or `2xH200, 2 NVLink ranks`."""
    gpu = gpu_name.replace("NVIDIA ", "").split()[0]
    if mode == RankMode.LOGICAL:
        return f"1x{gpu}, {ranks} logical ranks"
    return f"{ranks}x{gpu}, {ranks} NVLink ranks"


@dataclass(frozen=True)
class SymmetricWorkspace:
    """This rank's bytes of the symmetric workspace and the table its kernels
    reach every rank's through (`peer_bases[p]`: rank p's first byte)."""

    local: torch.Tensor
    peer_bases: list[int]
    keepalive: object = None  # what must live as long as the buffer: a handle, the allocation


class RankGroup(Protocol):
    """What a Buffer needs from its peers while it is built."""

    rank: int
    world_size: int
    shares_device: bool  # every rank of the group on this one GPU (logical ranks)

    def all_gather_object(self, obj: Any) -> list[Any]: ...

    def barrier(self) -> None: ...

    def symmetric_workspace(self, nbytes: int, device: torch.device) -> SymmetricWorkspace: ...


class TorchRankGroup:
    """One rank per process and GPU, through torch.distributed; the workspace is
    symmetric memory, its peers' addresses exchanged by the rendezvous."""

    shares_device = False

    def __init__(self, group=None) -> None:
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("afdep.Buffer needs torch.distributed to be initialized")
        self._dist = dist
        self.group = group or dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)

    def all_gather_object(self, obj: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        self._dist.all_gather_object(gathered, obj, group=self.group)
        return gathered

    def barrier(self) -> None:
        self._dist.barrier(group=self.group)

    def symmetric_workspace(self, nbytes: int, device: torch.device) -> SymmetricWorkspace:
        import torch
        import torch.distributed._symmetric_memory as symm_mem

        local = symm_mem.empty(nbytes, dtype=torch.uint8, device=device)
        handle = symm_mem.rendezvous(local, self.group.group_name)
        return SymmetricWorkspace(local, list(handle.buffer_ptrs), keepalive=handle)


# ---------------------------------------------------------------- logical ranks
def slice_stride(nbytes: int, alignment: int = SLICE_ALIGN) -> int:
    """Bytes from one logical rank's slice to the next."""
    return align(nbytes, alignment)


def logical_allocation_bytes(nbytes: int, world_size: int, alignment: int = SLICE_ALIGN) -> int:
    """The one allocation that holds every slice, with room to align the first."""
    return slice_stride(nbytes, alignment) * world_size + alignment


def logical_peer_bases(
    allocation: int, nbytes: int, world_size: int, alignment: int = SLICE_ALIGN
) -> list[int]:
    """Every rank's base in the one allocation starting at address `allocation`:
    the same table for every rank (one address space)."""
    first = align(allocation, alignment)
    stride = slice_stride(nbytes, alignment)
    return [first + rank * stride for rank in range(world_size)]


@dataclass
class RankFailure:
    rank: int
    error: BaseException
    trace: str  # the formatted traceback, for the rank's log


class RankFailures(RuntimeError):
    """Logical ranks whose host code raised; `failures` in rank order."""

    def __init__(self, failures: list[RankFailure]) -> None:
        self.failures = failures
        first = next(
            (f for f in failures if not isinstance(f.error, threading.BrokenBarrierError)),
            failures[0],
        )
        super().__init__(f"logical rank {first.rank}: {type(first.error).__name__}: {first.error}")


class Meeting:
    """A reusable barrier of `parties` threads. Unlike threading.Barrier, a
    break (`abort`) never reaches a thread whose meeting already completed,
    even if it has not woken yet: only those still waiting, and later ones."""

    def __init__(self, parties: int, timeout_s: float) -> None:
        self.parties = parties
        self.timeout_s = timeout_s
        self._cond = threading.Condition()
        self._arrived = 0
        self._generation = 0
        self._broken = False

    def wait(self) -> None:
        with self._cond:
            if self._broken:
                raise threading.BrokenBarrierError
            generation = self._generation
            self._arrived += 1
            if self._arrived == self.parties:
                self._arrived = 0
                self._generation += 1
                self._cond.notify_all()
                return
            met = self._cond.wait_for(
                lambda: self._generation != generation or self._broken, self.timeout_s
            )
            if not met:
                self._broken = True
                self._cond.notify_all()
            if self._generation == generation:
                raise threading.BrokenBarrierError

    def abort(self) -> None:
        with self._cond:
            self._broken = True
            self._cond.notify_all()


class LocalWorld:
    """N logical ranks' host code on N threads of one process, one at a time:
    a rank runs until it reaches a collective, where it gives up its turn and
    waits for every peer (so no two ranks call CUDA at once). A rank that
    raises breaks the barrier: its peers stop at their next collective. One
    `run` per world."""

    def __init__(self, world_size: int, *, timeout_s: float = BARRIER_TIMEOUT_S) -> None:
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        self.world_size = world_size
        self._barrier = Meeting(world_size, timeout_s)
        self._turn = threading.Lock()
        self._slots: list[Any] = [None] * world_size

    def meet(self) -> None:
        """Wait for every rank (called holding the turn)."""
        self._turn.release()
        try:
            self._barrier.wait()
        finally:
            self._turn.acquire()

    def gather(self, rank: int, obj: Any) -> list[Any]:
        self._slots[rank] = obj
        self.meet()
        gathered = list(self._slots)
        self.meet()  # every rank has read its copy before any writes the next
        return gathered

    def run(self, body: Callable[[LocalRankGroup], T]) -> list[T]:
        """`body(group)` for every logical rank, each on its own thread; the
        results in rank order, or RankFailures naming every rank that raised."""
        results: list[Any] = [None] * self.world_size
        failures: dict[int, RankFailure] = {}

        def rank_main(rank: int) -> None:
            with self._turn:
                try:
                    results[rank] = body(LocalRankGroup(self, rank))
                except BaseException as error:  # reported by the caller, per rank
                    failures[rank] = RankFailure(rank, error, traceback.format_exc())
                    self._barrier.abort()

        threads = [
            # daemon: Ctrl-C in the main thread ends the process, not waits for them
            threading.Thread(
                target=rank_main, args=(rank,), name=f"logical-rank-{rank}", daemon=True
            )
            for rank in range(self.world_size)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise RankFailures([failures[rank] for rank in sorted(failures)])
        return results


class LocalRankGroup:
    """Logical rank `rank` of a LocalWorld: its collectives meet the other
    threads; its workspace is a slice of one allocation made by rank 0."""

    shares_device = True

    def __init__(self, world: LocalWorld, rank: int) -> None:
        self.world = world
        self.rank = rank
        self.world_size = world.world_size

    def all_gather_object(self, obj: Any) -> list[Any]:
        return self.world.gather(self.rank, obj)

    def barrier(self) -> None:
        self.world.meet()

    def symmetric_workspace(self, nbytes: int, device: torch.device) -> SymmetricWorkspace:
        import torch

        n = self.world_size
        whole = None
        if self.rank == 0:
            whole = torch.empty(
                logical_allocation_bytes(nbytes, n), dtype=torch.uint8, device=device
            )
        whole = self.all_gather_object(whole)[0]
        bases = logical_peer_bases(whole.data_ptr(), nbytes, n)
        start = bases[self.rank] - whole.data_ptr()
        return SymmetricWorkspace(whole[start : start + nbytes], bases, keepalive=whole)


def rank_group(group=None) -> RankGroup:
    """A RankGroup as given, else torch.distributed's (`group`: a process group or None)."""
    if isinstance(group, (TorchRankGroup, LocalRankGroup)):
        return group
    return TorchRankGroup(group)
