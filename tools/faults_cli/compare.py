"""`afdep-faults compare --left .. --right ..`: two sets of sweep reports
side by side, the shards of a side merged."""

from __future__ import annotations

import argparse
from pathlib import Path

from hostio import writable_dir, write_text
from tools.faults_cli.steps import load


def compare_command(args: argparse.Namespace) -> int:
    from faults.report.compare import markdown, read_notes, read_side, rows

    if args.out:
        writable_dir(args.out.parent, "--out's folder")
    summarize = shard_summarizer(args)
    left = read_side(args.left, "--left", summarize)
    right = read_side(args.right, "--right", summarize)
    compared = rows(left, right, summarize)
    notes = read_notes(args.notes, compared) if args.notes else None
    text = markdown(left, right, compared, notes)
    if args.out:
        write_text(args.out, text)
    print(text, end="")
    return 0


def shard_summarizer(args: argparse.Namespace):
    """A fault's verdict over its runs from several shards, judged as the sweep
    judges one fault's runs (the catalog, loaded when first needed)."""
    from faults.report.compare import fault_verdict

    catalogs = []

    def summarize(fault_id: str, runs: list[dict]) -> str:
        if not catalogs:
            catalogs.append(load(args))
        return fault_verdict(catalogs[0], fault_id, runs)

    return summarize


def add_parser(commands) -> None:
    compare = commands.add_parser("compare", help="two sets of sweep reports, side by side")
    compare.add_argument("--left", type=Path, nargs="+", required=True, help="sweep JSON reports")
    compare.add_argument("--right", type=Path, nargs="+", required=True, help="sweep JSON reports")
    compare.add_argument("--out", type=Path, default=None, help="write the Markdown here")
    compare.add_argument(
        "--notes", type=Path, default=None, help="TOML: [why] fault id = why the sides differ"
    )
    compare.set_defaults(handler=compare_command)
