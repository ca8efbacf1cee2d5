"""`afdep-faults rejudge REPORT...`: sweep reports' runs judged again by
today's rules, from their recorded outcomes (no GPU)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hostio import (
    UsageError,
    writable_dir,
    write_json,
    write_text,
)
from tools.faults_cli.steps import load, read_sweep, workdir


def rejudge_command(args: argparse.Namespace) -> int:
    """Each report's runs judged again from their outcomes (faults/sweep/rejudge.py);
    every report is judged before any is rewritten, so a refusal leaves all
    as they were."""
    from faults.report.markdown import junit, markdown
    from faults.sweep.rejudge import RejudgeError, rejudge

    reports = [(path, read_sweep(path, "rejudge:")) for path in args.reports]
    for path, _ in reports:
        writable_dir(path.parent, f"rejudge: {path}'s folder")
    catalog = load(args)
    judged = []
    with workdir(args, "rejudge") as work:
        for i, (path, report) in enumerate(reports):
            try:
                again = rejudge(report, catalog, args.root, work.path / str(i), args.drop_changed)
                judged.append((path, again[0].to_json(), again[1]))
            except RejudgeError as error:
                raise UsageError(f"rejudge: {path}: {error}") from None
    for path, document, changes in judged:
        write_json(path, document)
        write_text(path.with_suffix(".md"), markdown(document))
        if path.with_suffix(".xml").exists():
            write_text(path.with_suffix(".xml"), junit(document))
        print(f"{path}: {len(changes)} verdict(s) changed")
        for change in changes:
            print(f"  {change}")
        for fault, was in document["rejudged"][-1]["dropped"].items():
            print(f"  dropped {fault} (was {was['verdict']}): {was['why']}")
    return 0


def add_parser(commands) -> None:
    again = commands.add_parser(
        "rejudge", help="sweep reports' runs judged again by today's rules, from their outcomes"
    )
    again.add_argument("reports", metavar="REPORT", type=Path, nargs="+", help="sweep JSON reports")
    again.add_argument(
        "--drop-changed",
        action="store_true",
        help="a fault whose tree changed since it ran leaves the report (to run again), "
        "instead of refusing it",
    )
    again.set_defaults(handler=rejudge_command)
