"""`afdep-faults replay RUN_ID --from REPORT`: that run again, as recorded
(docs/operators.md, "Seeded schedules and replay")."""

from __future__ import annotations

import argparse
from pathlib import Path

from faults.schedules.ids import parse_run_id
from faults.schedules.replay import (
    compare,
    recorded_run,
    replay_catalog,
    replay_markdown,
    replayed,
)
from hostio import (
    UsageError,
    gpu_count,
    writable_dir,
    write_json,
    write_text,
)
from tools.faults_cli.steps import load, read_sweep, workdir


def replay_command(args: argparse.Namespace) -> int:
    from faults.pipeline.apply import ApplyError
    from faults.pipeline.engine import Engine

    try:
        run = parse_run_id(args.run_id)
    except ValueError as error:
        raise UsageError(f"replay: {error}") from None
    report = read_sweep(args.source)
    recorded = recorded_run(report, run)
    if recorded is None:
        raise UsageError(f"replay: run id {run} is not in {args.source}")
    if args.rank_mode == "auto" and report.rank_mode:  # the sweep's, unless --rank-mode says
        args.rank_mode = report.rank_mode
    catalog = replay_catalog(load(args), run)
    config = catalog.config(run.config)
    if args.out is not None:
        writable_dir(args.out.parent, "replay: --out's folder")
    needed = catalog.gpus_for(config)
    if not args.no_run and gpu_count() < needed:
        raise UsageError(
            f"replay: config {config.name} needs {needed} GPUs, this machine has {gpu_count()}"
        )
    with workdir(args, "replay") as work:
        engine = Engine(catalog, args.root, work.path)
        with engine.guard():
            try:
                again = replayed(engine, run, config, apply_only=args.no_run)
            except ApplyError as error:
                raise UsageError(f"replay: {error}") from None
        comparison = compare(run, recorded, again, args.source)
        work.failed = not comparison["reproduced"]
    text = replay_markdown(comparison)
    if args.out is not None:
        json_path, markdown_path = (args.out.with_suffix(suffix) for suffix in OUT_SUFFIXES)
        write_json(json_path, comparison)
        write_text(markdown_path, text)
    print(text, end="")
    return 0 if comparison["reproduced"] else 1


# The files --out OUT names: OUT.json and OUT.md.
OUT_SUFFIXES = (".json", ".md")


def add_parser(commands) -> None:
    replay = commands.add_parser(
        "replay", help="run one run of a sweep report again, its schedule applied as recorded"
    )
    replay.add_argument("run_id", metavar="RUN_ID", help="<fault>[~s<seed>]@<config>#<repeat>")
    replay.add_argument(
        "--from", dest="source", type=Path, required=True, help="the sweep's JSON report"
    )
    replay.add_argument("--out", type=Path, default=None, help="write OUT.json and OUT.md")
    replay.add_argument(
        "--no-run", action="store_true", help="apply only: compare the schedule and tree digest"
    )
    replay.set_defaults(handler=replay_command, stems={"out": OUT_SUFFIXES})
