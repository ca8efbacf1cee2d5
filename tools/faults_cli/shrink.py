"""`afdep-faults shrink FAULT`: the smallest run input, by the catalog's
[shrink] dimensions, that still kills a must-fail fault (docs/operators.md,
"Shrinking"), with a command to rerun it and, on --write-test, its regression
case (tests/regress/shrunk/<fault>.json, run by tests/regress/test_shrunk.py).
The shrink is faults/shrink/; this module reads the arguments, checks this
machine and the output folders, and says what it found."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from hostio import (
    UsageError,
    at_least_one,
    gpu_count,
    positive_seconds,
    writable_dir,
)
from tools.faults_cli.steps import load, program, workdir

if TYPE_CHECKING:
    from faults.shrink.loop import Shrunk
    from faults.shrink.plan import ShrinkPlan
    from faults.shrink.report import ShrinkContext


def shrink_command(args: argparse.Namespace) -> int:
    # The engine and the shrink modules load only for this command.
    from faults.pipeline.engine import Engine
    from faults.shrink.loop import ShrinkError
    from faults.shrink.report import ShrinkContext, not_killed, write_regression_case
    from faults.shrink.runs import built_tree, shrink_on

    plan = planned(args)
    context = ShrinkContext.of(plan, args.catalog, args.root, args.budget_s, args.repeat)
    with workdir(args, "shrink") as work:
        engine = Engine(plan.catalog, args.root, work.path)
        with engine.guard():
            try:
                digest = built_tree(engine, args.id)
            except ShrinkError as error:
                work.failed = True  # its scratch tree and logs say why
                raise UsageError(str(error)) from None
            report = partial(say_reports, args, context, plan, digest)
            shrunk = shrink_on(engine, plan, args.budget_s, args.repeat, report)
        work.failed = not shrunk.start_killed
    report(shrunk)
    if not shrunk.start_killed:
        raise UsageError(not_killed(args.id, plan.config.name, shrunk))
    if args.write_test:
        path = write_regression_case(args.root, context, shrunk)
        print(f"regression case: {path} (tests/regress/test_shrunk.py runs it)")
    return 0


def planned(args: argparse.Namespace) -> ShrinkPlan:
    """The shrink's plan, this machine's GPUs and the output folders, every
    bad argument said in one line before any tree is copied."""
    from faults.shrink.plan import plan_shrink
    from faults.shrink.report import regression_case_path

    plan = plan_shrink(load(args), args.id, args.config)
    needs = plan.catalog.gpus_for(plan.config)
    have = gpu_count() if needs else 0
    if needs > have:
        raise UsageError(
            f"shrink: config {plan.config.name} needs {needs} GPUs, this machine has {have}"
        )
    if args.results_dir is not None:
        writable_dir(args.results_dir, "--results-dir")
    if args.write_test:
        writable_dir(regression_case_path(args.root, args.id).parent, "--write-test's folder")
    return plan


def say_reports(
    args: argparse.Namespace, context: ShrinkContext, plan: ShrinkPlan, digest: str, shrunk: Shrunk
) -> None:
    """The report of `shrunk` so far under --results-dir; printed once finished."""
    from faults.shrink.report import reports, write_reports

    doc, text = reports(context, plan, digest, shrunk, program())
    if shrunk.finished:
        print(text)
    if args.results_dir is None:
        return
    stem = write_reports(args.results_dir, context, doc, text)
    if shrunk.finished:
        print(f"reports: {stem}.json .md")


def add_parser(commands) -> None:
    """shrink, on the top parser's subcommands."""
    shrink = commands.add_parser(
        "shrink", help="the smallest run input, by the catalog's [shrink], that still kills ID"
    )
    shrink.add_argument("id", metavar="FAULT_ID", help="a must-fail fault the start input kills")
    shrink.add_argument(
        "--config", default=None, help="a config the fault runs under, or its real-size config <config>@<name>"
    )
    shrink.add_argument(
        "--budget-s", type=positive_seconds, default=300.0, help="stop probing after this long"
    )
    shrink.add_argument(
        "--repeat", type=at_least_one, default=1, help="runs a probe; kept only if all kill"
    )
    shrink.add_argument("--results-dir", type=Path, default=None, help="JSON and Markdown here")
    shrink.add_argument(
        "--write-test",
        action="store_true",
        help="write tests/regress/shrunk/<fault>.json: the fault KILLED at the minimal input",
    )
    shrink.set_defaults(handler=shrink_command)
