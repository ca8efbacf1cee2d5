"""`afdep-faults sweep`: controls first, then every fault (over seeds with
--seeds, the rest of a shard with --rest-of), with progress; reports and history."""

from __future__ import annotations

import argparse
from pathlib import Path

from hostio import (
    UsageError,
    at_least,
    at_least_one,
    gpu_count,
    positive_seconds,
)
from tools.faults_cli.run import add_config_arguments
from tools.faults_cli.steps import ProgressLines, chosen_slots, load, read_sweep, workdir

# Each seed is a tree of its own per scheduled fault, built and run: 1000
# seeds of one fault are already about a thousand builds and runs (hours on
# afdep's 2 GPUs), so a larger count is a typo, refused before any work.
MAX_SEEDS = 1000


def sweep_command(args: argparse.Namespace) -> int:
    from faults.report.markdown import markdown
    from faults.sweep.sweep import Sweep, SweepOptions

    rest_of(args)
    catalog = load(args)
    slots = chosen_slots(args) if catalog.gpus_needed <= gpu_count() else 1
    options = SweepOptions(
        args.only, args.config, args.repeat, slots, args.results_dir, args.history
    )
    options.exposure = not args.no_exposure
    options.budget_s = args.budget_s
    options.matrix = args.matrix
    options.seeds = sweep_seeds(args)
    with workdir(args, "sweep") as work:
        plan = Sweep.plan(catalog, args.root, work.path, options, gpu_count())
        with ProgressLines("faults", len(plan.fault_ids)) as progress:
            plan.run(progress.say, progress.advance)
        report = plan.report()
        work.failed = not plan.ok(report)
    unrecorded = plan.record(report)
    stem = plan.write(report)
    print(markdown(report.to_json()))
    if unrecorded:
        print(unrecorded)
    print(f"reports: {stem}.json .md .xml")
    why = plan.why_not_ok(report)
    if why:
        print(f"exit 1: {why}")
    return 0 if plan.ok(report) else 1


def sweep_seeds(args: argparse.Namespace) -> tuple[int, ...]:
    """--seeds K from --seed-base S: S .. S+K-1 (none: the faults as written)."""
    seeds = getattr(args, "seeds", None)
    return tuple(range(args.seed_base, args.seed_base + seeds)) if seeds else ()


def rest_of(args: argparse.Namespace) -> None:
    """--rest-of REPORT: the faults an earlier shard's budget left (its
    `unrun`) become --only and, with no --config, its configs become the
    configs; refused before any work for a report that is not a sweep's, of
    another catalog, or that left nothing, or beside --only."""
    from faults.sweep.selection import left_unrun

    if args.rest_of is None:
        return
    named = f"sweep: --rest-of {args.rest_of}"
    if args.only:
        raise UsageError(f"{named}: --only chooses the faults too; give one of them")
    report = read_sweep(args.rest_of, "sweep: --rest-of")
    args.only = left_unrun(report, args.catalog, named)
    if args.config is None:
        args.config = list(report.gpus_needed) or None


def add_parser(commands) -> None:
    sweep = commands.add_parser("sweep")
    sweep.add_argument(
        "--only", action="append", default=None, help="a regular expression matching whole ids"
    )
    sweep.add_argument(
        "--slots",
        type=at_least_one,
        default=None,
        help="must-pass faults run this many at a time per GPU group (must-fail: one); "
        "default: as measured on this machine (docs/results/engine-cost-<machine>-logical.json)",
    )
    sweep.add_argument("--results-dir", type=Path, default=None)
    sweep.add_argument("--history", type=Path, default=None, help="SQLite history")
    sweep.add_argument(
        "--no-exposure", action="store_true", help="leave out the configs' real-size configs"
    )
    sweep.add_argument(
        "--matrix",
        action="store_true",
        help="the configs: the catalog's [matrix] points, each fault under every one "
        "where its sites fire (its clean control probes them)",
    )
    sweep.add_argument(
        "--budget-s",
        type=positive_seconds,
        default=None,
        help="start no fault after this long; the report names those not run",
    )
    add_config_arguments(sweep)
    sweep.add_argument(
        "--seeds",
        type=at_least(1, MAX_SEEDS),
        default=None,
        help=f"run each fault with a scheduled delay once per seed (its own tree; at most "
        f"{MAX_SEEDS})",
    )
    sweep.add_argument(
        "--seed-base", type=at_least(0), default=0, help="the first seed of --seeds (default 0)"
    )
    sweep.add_argument(
        "--rest-of",
        type=Path,
        default=None,
        metavar="REPORT",
        help="the faults an earlier shard's budget left (its JSON report), under its configs "
        "unless --config",
    )
    sweep.set_defaults(handler=sweep_command)
