"""`afdep-faults shrink FAULT`: the smallest run input, by the catalog's
[shrink] dimensions, that still kills a must-fail fault (docs/operators.md,
"Shrinking"), with a command to rerun it and, on --write-test, its regression
case (tests/regress/shrunk/<fault>.json, run by tests/regress/test_shrunk.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hostio import (
    UsageError,
    at_least_one,
    gpu_count,
    machine_name,
    positive_seconds,
    writable_dir,
    write_json,
    write_text,
)
from tools.faults_cli.steps import load, program, workdir

if TYPE_CHECKING:
    from faults.catalog import Catalog, Config
    from faults.catalog.shrink import Number
    from faults.shrink.loop import Shrunk
    from faults.shrink.report import ShrinkContext


def shrink_command(args: argparse.Namespace) -> int:
    # The engine and the shrink modules load only for this command.
    from faults.pipeline.engine import Engine
    from faults.shrink.loop import ShrinkLoop, start_alternatives
    from faults.shrink.report import (
        ShrinkContext,
        minimal_args,
        regression_case,
        regression_case_path,
    )
    from faults.shrink.runs import engine_runner

    catalog, config, words, start = planned(args)
    context = ShrinkContext(
        fault=args.id,
        config=config.name,
        rank_mode=str(catalog.rank_mode),
        machine=machine_name(),
        catalog=catalog_name(args.catalog, args.root),
        budget_s=args.budget_s,
        repeat=args.repeat,
        gpus=catalog.gpus_for(config),
    )
    with workdir(args, "shrink") as work:
        engine = Engine(catalog, args.root, work.path)
        with engine.guard():
            prepared = engine.prepare(args.id, args.id)
            if prepared.error:
                work.failed = True
                first = prepared.error.reason.splitlines()[0]
                raise UsageError(f"shrink: {args.id}: {prepared.error.verdict}: {first}")

            def report(shrunk: Shrunk) -> None:
                write_reports(args, context, catalog, config, prepared.digest, shrunk)

            runner = engine_runner(engine, args.id, config)
            loop = ShrinkLoop(catalog.shrink, words, runner, args.budget_s, args.repeat)
            loop.on_probe = report  # a report as it goes: a killed shrink still has one
            shrunk = loop.run(start, start_alternatives(catalog.shrink, words, start))
        work.failed = not shrunk.start_killed
    report(shrunk)
    if not shrunk.start_killed:
        raise UsageError(not_killed(args.id, config.name, shrunk))
    if args.write_test:
        path = regression_case_path(args.root, args.id)
        write_json(path, regression_case(context, minimal_args(shrunk)))
        print(f"regression case: {path} (tests/regress/test_shrunk.py runs it)")
    return 0


def planned(args: argparse.Namespace) -> tuple[Catalog, Config, list[str], dict[str, Number]]:
    """The catalog, config, run command and start input, every bad argument
    said in one line before any tree is copied."""
    from faults.shrink.loop import ShrinkError, start_input
    from faults.shrink.report import regression_case_path
    from faults.shrink.runs import chosen_config, shrink_catalog

    catalog = shrink_catalog(load(args))
    if catalog.shrink is None:
        raise UsageError(f"shrink: {args.catalog}: no [shrink] table to shrink by")
    try:
        config = chosen_config(catalog, args.id, args.config)
        words = list(catalog.target.run + config.args)
        start = start_input(catalog.shrink, words)
    except ShrinkError as error:
        raise UsageError(str(error)) from None
    needs = catalog.gpus_for(config)
    have = gpu_count() if needs else 0
    if needs > have:
        raise UsageError(
            f"shrink: config {config.name} needs {needs} GPUs, this machine has {have}"
        )
    if args.results_dir is not None:
        writable_dir(args.results_dir, "--results-dir")
    if args.write_test:
        writable_dir(regression_case_path(args.root, args.id).parent, "--write-test's folder")
    return catalog, config, words, start


def not_killed(fault: str, config: str, shrunk: Shrunk) -> str:
    verdicts = "; ".join(" ".join(probe.verdicts) for probe in shrunk.probes)
    others = len(shrunk.probes) - 1
    where = "the start input" + (
        f" nor at the {others} other starts its run command's lists give" if others else ""
    )
    return (
        f"shrink: {fault} is not KILLED at {where} under {config} ({verdicts}): nothing to shrink"
    )


def catalog_name(catalog: Path, root: Path) -> str:
    """The catalog as the tree names it (relative to the root), else its path."""
    try:
        return str(Path(catalog).resolve().relative_to(root))
    except ValueError:
        return str(Path(catalog).resolve())


def write_reports(
    args: argparse.Namespace,
    context: ShrinkContext,
    catalog: Catalog,
    config: Config,
    digest: str,
    shrunk: Shrunk,
) -> None:
    """The report of `shrunk` so far under --results-dir; printed once finished."""
    from faults.shrink.report import document, markdown, minimal_args, paste_command, report_stem

    rerun = minimal_args(shrunk) or shrunk.probes[0].args
    command = paste_command(program(), context, catalog, config, rerun, digest)
    doc = document(context, shrunk, command)
    text = markdown(doc)
    if shrunk.finished:
        print(text)
    if args.results_dir is None:
        return
    stem = args.results_dir / report_stem(context)  # a fault id holds dots: no with_suffix
    write_json(stem.with_name(f"{stem.name}.json"), doc)
    write_text(stem.with_name(f"{stem.name}.md"), text)
    if shrunk.finished:
        print(f"reports: {stem}.json .md")


def add_parser(commands) -> None:
    """shrink, on the top parser's subcommands."""
    shrink = commands.add_parser(
        "shrink", help="the smallest run input, by the catalog's [shrink], that still kills ID"
    )
    shrink.add_argument("id", metavar="FAULT_ID", help="a must-fail fault the start input kills")
    shrink.add_argument(
        "--config", default=None, help="a config the fault runs under, or its twin <config>@<name>"
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
