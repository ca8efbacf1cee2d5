"""Seeded launch skew: per step, which rank starts first and how late the
others start, so that a consumer sometimes waits on its producer
(docs/synchronization.md, "Launch skew").

The schedule is a pure function of (seed, step, world size): every rank (or
every logical rank of one process) computes the same one and applies its own
entry on its own stream, host-side, outside any CUDA graph."""

from __future__ import annotations

import argparse
import hashlib

import torch

from afdep.vocab import Word, skew_line

# Delays in SM clock cycles (torch.cuda._sleep spins on clock64): 5 to 50 us
# at the H200's 1.98 GHz; shorter than the epilogue's ~22 us start-up hides
# nothing, longer only slows the run.
MIN_DELAY_CYCLES = 10_000
MAX_DELAY_CYCLES = 100_000


class LaunchSkew(Word):
    OFF = "off"
    SEEDED = "seeded"


def _draw(*key: object) -> int:
    """A 64-bit number from the key, the same on every platform and Python."""
    digest = hashlib.blake2b(":".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def step_kind(seed: int, step: int, world_size: int) -> int | None:
    """The rank that starts first at `step`, or None for a step with no skew.

    Steps come in blocks of world_size + 1: each block holds one step of each
    kind (no skew, rank r first for every r) in an order drawn from the seed,
    so every short run has both orders and an unskewed step."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    kinds: list[int | None] = [None, *range(world_size)]
    block = step // len(kinds)
    order = sorted(kinds, key=lambda kind: _draw("order", seed, block, kind))
    return order[step % len(kinds)]


def launch_delays(seed: int, step: int, world_size: int) -> tuple[int, ...]:
    """Cycles each rank sleeps on its stream before `step`'s kernels: 0 for the
    rank that starts first, MIN..MAX_DELAY_CYCLES for the others; all 0 on an
    unskewed step."""
    first = step_kind(seed, step, world_size)
    if first is None:
        return (0,) * world_size
    span = MAX_DELAY_CYCLES - MIN_DELAY_CYCLES + 1
    return tuple(
        0 if rank == first else MIN_DELAY_CYCLES + _draw("delay", seed, step, rank) % span
        for rank in range(world_size)
    )


def delay_stream(cycles: int) -> None:
    """Enqueue a `cycles`-long spin on the current stream (the rank's own, when
    ranks share a GPU); nothing for 0."""
    if cycles < 0:
        raise ValueError(f"cycles must be >= 0, got {cycles}")
    if cycles:
        torch.cuda._sleep(cycles)


def launch_delay(args: argparse.Namespace, step: int, rank: int, world_size: int) -> int:
    """This rank's launch delay at `step` in cycles, logged as one line."""
    cycles = 0
    if args.skew == LaunchSkew.SEEDED:
        cycles = launch_delays(args.skew_seed, step, world_size)[rank]
    print(skew_line(step, rank, cycles), flush=True)
    return cycles
