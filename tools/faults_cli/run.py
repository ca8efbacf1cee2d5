"""`afdep-faults run ID`: apply, build, run every chosen config, judge; one
summary line per run, and with --report the JSON document."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from hostio import (
    UsageError,
    at_least_one,
    write_json,
)
from tools.faults_cli.steps import fitting_configs, load, workdir


def run_command(args: argparse.Namespace) -> int:
    from faults.pipeline.engine import Engine
    from faults.pipeline.run import overridden_env
    from faults.report.document import run_report, summary_line

    catalog = load(args)
    catalog.fault(args.id)  # an unknown id is named before any GPU question
    configs = catalog.configs_for(args.id, fitting_configs(catalog, args.config))
    if not configs:
        raise UsageError(
            f"run: fault {args.id} runs under {list(catalog.fault(args.id).configs)}, "
            "none of them chosen or fitting here"
        )
    overridden = overridden_env(catalog.target)
    if overridden:
        print(overridden)
    started = time.perf_counter()
    with workdir(args, "run") as work:
        engine = Engine(catalog, args.root, work.path)
        with engine.guard() as guard:
            results = engine.evaluate(args.id, configs, args.repeat)
        work.failed = not all(r.ok for r in results)
        for result in results:
            print(summary_line(result))
    if args.report:
        wall_s = time.perf_counter() - started
        report = run_report(args.catalog, catalog, configs, results, guard.before, wall_s)
        write_json(args.report, report.to_json())
    return 0 if all(r.ok for r in results) else 1


def add_parser(commands) -> None:
    run = commands.add_parser("run")
    run.add_argument("id")
    run.add_argument("--report", type=Path, default=None, help="the JSON report")
    add_config_arguments(run)
    run.set_defaults(handler=run_command)


def add_config_arguments(command) -> None:
    """--config and --repeat, as `run` and `sweep` take them."""
    command.add_argument("--config", action="append", default=None)
    command.add_argument("--repeat", type=at_least_one, default=1)
