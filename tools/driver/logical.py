"""The correctness driver's rank modes, and its logical mode: every rank of the
run in this one process on one GPU (docs/synchronization.md, "One GPU, logical
ranks").

    python -m tools.driver --mode logical --ranks 4 --ffn-ranks 1 --graph

The checks, the log lines and the result line are the torchrun driver's; each
host line carries its logical rank as torchrun's `--tee` writes it, and the
result carries `mode` and `rank_mode` ("1xH200, 2 logical ranks")."""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

import afdep
from afdep.logical import LogicalRanks, logical_ranks
from afdep.ranks import MAX_LOGICAL_RANKS, RankFailures, rank_mode_label
from afdep.residency import ResidencyError
from afdep.vocab import MISMATCH, digest_line, result_line
from hostio import RankMode, UsageError, at_least, gpu_count
from invariants.data.reference import dispatch_reference
from tools.driver.logical_steps import LogicalStepper
from tools.driver.phases import Phase, PhaseClock
from tools.driver.parts import (
    INVALID_STEP,
    buffer_arguments,
    failure_line,
    log,
    parse_role_env,
    protocol_name,
    role_of,
    run_summary,
    step_sources,
)
from tools.driver.ranklog import RankTags, tagged_output
from tools.driver.skew import launch_delay
from tools.driver.steps import StepRunner, inject_invalid_route
from tools.driver.watchdog import step_deadline, step_deadline_s

# Logical ranks issue their launches into shared hardware queues; more queues
# than streams keeps one rank's waiting command from standing before another's.
# Modules load at once, not at a kernel's first launch: a lazy load waits for
# the context, where another rank's kernel spins on this one (ARM=attention eager
# hung at cf.attention_dispatch.prefix_wait on 1xH200 with lazy loading, passed with eager).
CONNECTIONS = {"CUDA_DEVICE_MAX_CONNECTIONS": "32", "CUDA_MODULE_LOADING": "EAGER"}


def use_connections() -> None:
    """CONNECTIONS in this process's environment, unless set there already:
    before CUDA starts, which reads them."""
    for name, value in CONNECTIONS.items():
        os.environ.setdefault(name, value)


def add_rank_mode_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mode",
        type=RankMode,
        choices=list(RankMode),
        default=None,
        help="per-gpu: a rank per GPU under torchrun (the default there); logical: every "
        "rank in this process on one GPU (the default for a plain process)",
    )
    parser.add_argument(
        "--ranks",
        type=at_least(2),
        default=None,
        help=f"ranks in all (logical: 2..{MAX_LOGICAL_RANKS}, default --ffn-ranks + 1; "
        "per-gpu: torchrun's world size)",
    )


def resolve_rank_mode(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Fill in `args.mode` and `args.ranks` for this process (torchrun sets
    WORLD_SIZE); UsageError naming the argument when they cannot hold."""
    world = int(environ.get("WORLD_SIZE", "1"))
    mode = args.mode or (RankMode.PER_GPU if world >= 2 else RankMode.LOGICAL)
    if mode == RankMode.PER_GPU:
        if world < 2:
            raise UsageError(
                "--mode per-gpu: needs torchrun with 2+ ranks (afdep drive --nproc N); "
                "this is a plain process"
            )
        if args.ranks not in (None, world):
            raise UsageError(f"--ranks {args.ranks}: torchrun started {world} ranks")
        args.mode, args.ranks = mode, world
        return
    if world >= 2:
        raise UsageError(
            f"--mode logical: runs every rank in one process; this one is one of {world} "
            "torchrun ranks"
        )
    ranks = args.ffn_ranks + 1 if args.ranks is None else args.ranks
    if not 2 <= ranks <= MAX_LOGICAL_RANKS:
        raise UsageError(f"--ranks {ranks}: logical mode runs 2..{MAX_LOGICAL_RANKS} ranks")
    if args.ffn_ranks >= ranks:
        raise UsageError(f"--ranks {ranks}: no attention rank beside --ffn-ranks {args.ffn_ranks}")
    if args.bench_iters:
        raise UsageError(
            "--bench-iters: logical ranks share one GPU, their timings are no NVLink figures"
        )
    for item in args.role_env:
        if not parse_role_env(item)[1].startswith("AFDEP_"):
            raise UsageError(
                f"--role-env {item!r}: logical ranks share one process; only AFDEP_* knobs "
                "can differ per role"
            )
    args.mode, args.ranks = mode, ranks


def rank_environs(args: argparse.Namespace, environ: Mapping[str, str]) -> list[dict[str, str]]:
    """The environment each logical rank reads its knobs from: this process's,
    with its role's `--role-env` settings."""
    environs = []
    for rank in range(args.ranks):
        own = dict(environ)
        for role, name, value in map(parse_role_env, args.role_env):
            if role == role_of(rank, args.ranks, args.ffn_ranks):
                own[name] = value
        environs.append(own)
    return environs


@dataclass
class RankTally:
    """One rank's checks over the run, as the torchrun driver's `run` keeps them."""

    checks: int = 0
    mismatches: list[str] = field(default_factory=list)
    protocols: list[str] = field(default_factory=list)


def tally_step(tally, runner, sources, *, step, num_tokens, invalid, args, references) -> None:
    """One rank's checks of a finished step (the torchrun driver's, per rank),
    against the step's `references` (made once for every rank)."""
    buffer = runner.buffer
    if invalid:
        tally.mismatches.append(f"{MISMATCH} route {args.invalid_route}: the step ran clean")
    else:
        checks, mismatches = runner.check(sources, step, num_tokens, references)
        tally.checks += checks
        tally.mismatches += mismatches
    ran, expected = buffer.last_protocol(), buffer.protocol_for(num_tokens)
    tally.protocols.append(protocol_name(ran))
    if ran != expected:
        tally.mismatches.append(
            f"{MISMATCH} protocol rank={buffer.rank} step={step} "
            f"tokens={num_tokens}: ran {protocol_name(ran)}, not {expected}"
        )


def run_steps(
    args: argparse.Namespace, ranks: LogicalRanks, tags: RankTags, clock: PhaseClock
) -> list[dict]:
    runners = [StepRunner(buffer, graph=args.graph) for buffer in ranks.buffers]
    stepper = LogicalStepper(runners, ranks.streams, graph=args.graph)
    tallies = [RankTally() for _ in runners]
    deadline_s = step_deadline_s(ranks.buffers[0].config.timeout_ms)
    step = 0
    for num_tokens in args.tokens:
        for _ in range(args.steps):
            with clock.timed(Phase.INPUTS):
                g = ranks.geometry
                sources = step_sources(args, g, ranks.buffers[0].device, step, num_tokens)
            invalid = args.invalid_route is not None and step == INVALID_STEP
            if invalid:
                g = ranks.geometry
                kind, token, slot = inject_invalid_route(sources, args.invalid_route, g.num_experts)
                for rank in range(ranks.world_size):
                    with tags.speaking(rank):
                        log(rank, f"injected: route {kind} token={token} slot={slot}")
            skip = frozenset({args.test_skip_dispatch_rank}) if step == 0 else frozenset()
            delays = []
            for rank in range(ranks.world_size):
                with tags.speaking(rank):
                    delays.append(launch_delay(args, step, rank, ranks.world_size))
            ranks_here = list(range(ranks.world_size))
            with clock.timed(Phase.STEPS), step_deadline(deadline_s, step, ranks_here):
                stepper.step(sources, bucket=num_tokens, skip_ranks=skip, delays=delays)
                torch.cuda.synchronize()  # a trap or timeout surfaces here as a CUDA error
            with clock.timed(Phase.REFERENCE):
                references = (
                    None if invalid else dispatch_reference(sources, g.num_experts, g.ffn_ranks)
                )
            with clock.timed(Phase.CHECKS):
                for rank, runner in enumerate(runners):
                    with tags.speaking(rank):
                        tally_step(
                            tallies[rank], runner, sources, step=step, num_tokens=num_tokens,
                            invalid=invalid, args=args, references=references,
                        )  # fmt: skip
            step += 1
    results = []
    for rank, (runner, tally) in enumerate(zip(runners, tallies, strict=True)):
        with tags.speaking(rank):
            for line in tally.mismatches:
                log(rank, line)
        results.append(
            {
                "rank": rank,
                "role": runner.buffer.role,
                "checks": tally.checks,
                "mismatches": len(tally.mismatches),
                "protocols": sorted(set(tally.protocols)),
                "steps": step,
                "timings_us": {},
            }
        )
    return results


def fail_ranks(tags: RankTags, failures: list[tuple[int, BaseException, str]], digest: str):
    """Each failed rank's traceback and failure line, as each torchrun rank
    prints its own; then exit at once (a CUDA error leaves the context unusable)."""
    for rank, error, trace in failures:
        with tags.speaking(rank):
            print(trace.rstrip("\n"), file=sys.stderr, flush=True)
            print(failure_line(rank, error, digest), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def main_logical(args: argparse.Namespace) -> int:
    """The driver's logical mode (args resolved: `args.ranks` logical ranks)."""
    use_connections()  # read when CUDA starts, below
    if gpu_count() < 1:
        print("afdep drive: error: --mode logical: needs a GPU, found 0", file=sys.stderr)
        return 2
    tags = RankTags()
    digest = afdep.source_digest()
    clock = PhaseClock()  # the context's phase is outside the run's wall_s, as under torchrun
    with clock.timed(Phase.CONTEXT):
        label = rank_mode_label(RankMode.LOGICAL, args.ranks, torch.cuda.get_device_name())
    started = time.perf_counter()
    with tagged_output(tags):
        print(digest_line(digest), flush=True)
        print(f"afdep.__file__ = {afdep.__file__}", flush=True)
        print(f"rank mode: {label}", flush=True)
        environs = rank_environs(args, os.environ)
        try:
            with clock.timed(Phase.BUFFERS):
                ranks = logical_ranks(args.ranks, environs=environs, **buffer_arguments(args))
        except ResidencyError as error:
            print(f"afdep drive: error: {error}", file=sys.__stderr__, flush=True)
            return 2
        except RankFailures as failed:  # every rank fails: a peer's error breaks the barrier
            fail_ranks(tags, [(f.rank, f.error, f.trace) for f in failed.failures], digest)
        try:
            results = run_steps(args, ranks, tags, clock)
        except Exception as error:  # one context: a CUDA error ends every rank
            trace = traceback.format_exc()
            fail_ranks(tags, [(rank, error, trace) for rank in range(args.ranks)], digest)
        config = afdep.Settings.from_env(environs[0])
        summary = run_summary(results, digest, RankMode.LOGICAL, label, args, config, started)
        summary["phases_s"] = clock.as_dict()
        print(result_line(summary), flush=True)
    return 0 if summary["ok"] else 1
