"""The correctness driver: dispatch -> per-expert function -> combine, checked
bitwise against invariants.data.reference on every step.

    torchrun --standalone --nproc-per-node=2 -m tools.driver --payload bf16 --graph
    python -m tools.driver --mode logical --ranks 2 --payload bf16 --graph  (one GPU)

Prints the source digest, `Mismatched ...` lines on failure, and one final line
`AFDEP_RESULT {json}`. Exit 0 only when every check matched. A CUDA error (a
route assertion, a wait timeout) ends the rank with exit 1 at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

import afdep
from afdep.config import environment_error
from afdep.ranks import rank_mode_label
from afdep.vocab import MISMATCH, RouteKind, digest_line, result_line
from hostio import OneLineParser, RankMode, UsageError, at_least
from tools.driver.logical import add_rank_mode_arguments, main_logical, resolve_rank_mode
from tools.driver.parts import (
    INVALID_STEP,
    ROLES,
    apply_role_env,
    buffer_arguments,
    failure_line,
    log,
    parse_role_env,
    protocol_name,
    run_summary,
    step_sources,
)
from tools.driver.skew import LaunchSkew, launch_delay
from tools.driver.steps import StepRunner, inject_invalid_route
from tools.driver.watchdog import step_deadline, step_deadline_s


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(prog="afdep drive", description=__doc__)
    add_geometry_options(parser)
    add_input_options(parser)
    add_skew_options(parser)
    add_failure_options(parser)
    add_rank_mode_arguments(parser)
    args = parser.parse_args(argv)
    resolve_skew_options(parser, args)
    for item in args.role_env:  # kept as written: the summary records the arguments
        try:
            parse_role_env(item)
        except ValueError as error:
            parser.error(str(error))
    if args.invalid_route is not None:
        args.invalid_route = RouteKind(args.invalid_route)
    if args.experts_per_ffn is not None:
        args.num_experts = args.experts_per_ffn * args.ffn_ranks
    if args.invalid_execution is not None:
        args.graph = args.invalid_execution == "graph"
    if max(args.tokens) > args.capacity:
        parser.error(
            f"argument --tokens: {max(args.tokens)} is more than --capacity {args.capacity}"
        )
    if args.invalid_route is not None and max(args.tokens) >= args.capacity:
        parser.error("--invalid-route needs a token count below --capacity (dummy uses padding)")
    if args.steps < 1 or args.invalid_route and args.steps <= INVALID_STEP:
        parser.error(f"--steps must be >= 1 (> {INVALID_STEP} with --invalid-route)")
    return args


def refuse_a_bad_environment() -> None:
    """A stray or bad `AFDEP_*` variable, as UsageError, before any GPU work."""
    problem = environment_error()
    if problem is not None:
        raise UsageError(problem)


def add_geometry_options(parser: argparse.ArgumentParser) -> None:
    """The geometry and how the steps run (payload, ranks, sizes, graphs)."""
    parser.add_argument("--payload", choices=("bf16", "fp8"), default="bf16")
    parser.add_argument("--ffn-ranks", type=at_least(1), default=1)
    parser.add_argument("--num-experts", type=at_least(1), default=128)
    parser.add_argument(
        "--experts-per-ffn",
        type=at_least(1),
        default=None,
        help="overrides --num-experts: experts = this x ffn ranks",
    )
    parser.add_argument("--capacity", type=at_least(1), default=2048)
    parser.add_argument("--hidden-size", type=at_least(1), default=2048)
    parser.add_argument("--top-k", type=at_least(1), default=8)
    parser.add_argument("--num-sms", type=at_least(1), default=24)
    parser.add_argument("--tokens", type=at_least(0), nargs="+", default=[1, 8, 128, 512, 2048])
    execution = parser.add_mutually_exclusive_group()
    execution.add_argument("--graph", dest="graph", action="store_true")
    execution.add_argument("--eager", dest="graph", action="store_false")
    parser.set_defaults(graph=False)
    parser.add_argument("--collect-view", action="store_true")
    parser.add_argument("--steps", type=int, default=3, help="steps per token count")


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """What each step's inputs are and what else the run does with them."""
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--empty-prob", type=float, default=0.1, help="probability that a top-k entry is -1"
    )
    parser.add_argument(
        "--route-skew",
        type=int,
        default=None,
        metavar="EXPERT",
        help="route every real token's slot 0 to this expert",
    )
    parser.add_argument(
        "--bench-iters",
        type=int,
        default=0,
        help="after the checks, time this many graph replays per token count",
    )
    parser.add_argument(
        "--role-env",
        action="append",
        default=[],
        metavar="ROLE:VAR=VAL",
        help=f"set an environment variable on one role only ({' or '.join(ROLES)})",
    )


def add_failure_options(parser: argparse.ArgumentParser) -> None:
    """The failures a run provokes on purpose (validate's failure rows)."""
    parser.add_argument("--invalid-route", choices=[k.value for k in RouteKind], default=None)
    parser.add_argument("--invalid-execution", choices=("eager", "graph"), default=None)
    parser.add_argument(
        "--test-skip-dispatch-rank",
        type=int,
        default=None,
        help="test only: this rank sends nothing at the first step",
    )


def add_skew_options(parser: argparse.ArgumentParser) -> None:
    """--skew and --skew-seed (docs/synchronization.md, "Launch skew")."""
    parser.add_argument(
        "--skew",
        choices=[mode.value for mode in LaunchSkew],
        default=LaunchSkew.SEEDED.value,
        help="per step, which rank launches first and how late the others do (seeded: from "
        "--skew-seed; off: all at once)",
    )
    parser.add_argument(
        "--skew-seed",
        type=at_least(0),
        default=None,
        help="the launch skew's seed (default: --seed)",
    )


def resolve_skew_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    args.skew = LaunchSkew(args.skew)
    if args.skew == LaunchSkew.OFF and args.skew_seed is not None:
        parser.error("--skew-seed needs --skew seeded")
    if args.skew == LaunchSkew.SEEDED and args.skew_seed is None:
        args.skew_seed = args.seed  # the summary's config records the seed that ran


def run(args: argparse.Namespace, rank: int) -> dict:
    buffer = afdep.Buffer(**buffer_arguments(args))
    g = buffer.geometry
    runner = StepRunner(buffer, graph=args.graph)
    checks, mismatches, protocols, timings = 0, [], [], {}
    global_step = 0
    deadline_s = step_deadline_s(buffer.config.timeout_ms)
    for num_tokens in args.tokens:
        for _ in range(args.steps):
            sources = step_sources(args, g, buffer.device, global_step, num_tokens)
            invalid = args.invalid_route is not None and global_step == INVALID_STEP
            if invalid:
                kind, token, slot = inject_invalid_route(sources, args.invalid_route, g.num_experts)
                log(rank, f"injected: route {kind} token={token} slot={slot}")
            skip = args.test_skip_dispatch_rank == rank and global_step == 0
            delay = launch_delay(args, global_step, rank, dist.get_world_size())
            with step_deadline(deadline_s, global_step, [rank]):
                runner.step(sources, bucket=num_tokens, skip_send=skip, delay_cycles=delay)
                torch.cuda.synchronize()  # a trap or timeout surfaces here as a CUDA error
            if invalid:
                mismatches.append(f"{MISMATCH} route {args.invalid_route}: the step ran clean")
            else:
                step_checks, step_mismatches = runner.check(sources, global_step, num_tokens)
                checks += step_checks
                mismatches += step_mismatches
            ran, expected = buffer.last_protocol(), buffer.protocol_for(num_tokens)
            protocols.append(protocol_name(ran))
            if ran != expected:
                mismatches.append(
                    f"{MISMATCH} protocol rank={rank} step={global_step} "
                    f"tokens={num_tokens}: ran {protocol_name(ran)}, not {expected}"
                )
            global_step += 1
        if args.bench_iters:
            timings[str(num_tokens)] = runner.bench(sources, args.bench_iters)
    for line in mismatches:
        log(rank, line)
    return {
        "rank": rank,
        "role": buffer.role,
        "checks": checks,
        "mismatches": len(mismatches),
        "protocols": sorted(set(protocols)),
        "steps": global_step,
        "timings_us": timings,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        refuse_a_bad_environment()
        resolve_rank_mode(args, os.environ)
    except UsageError as error:
        print(f"afdep drive: error: {error}", file=sys.stderr)
        return 2
    if args.mode == RankMode.LOGICAL:
        return main_logical(args)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()
    apply_role_env(args, rank, dist.get_world_size())
    digest = afdep.source_digest()
    label = rank_mode_label(args.mode, args.ranks, torch.cuda.get_device_name())
    if rank == 0:
        print(digest_line(digest), flush=True)
        print(f"afdep.__file__ = {afdep.__file__}", flush=True)
        print(f"rank mode: {label}", flush=True)
    started = time.perf_counter()
    try:
        result = run(args, rank)
    except Exception as error:  # a CUDA error leaves the context unusable: report, exit now
        traceback.print_exc()
        print(failure_line(rank, error, digest), flush=True)
        sys.stdout.flush()
        os._exit(1)
    gathered: list[dict | None] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, result)
    summary = run_summary(
        gathered, digest, args.mode, label, args, afdep.Settings.from_env(), started
    )
    if rank == 0:
        print(result_line(summary), flush=True)
    dist.destroy_process_group()
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
