"""`afdep-faults merge SHARD... --results-dir DIR`: a sweep's shards made one
report (docs/tools.md, "Sharded sweeps")."""

from __future__ import annotations

import argparse
from pathlib import Path

from hostio import (
    RankMode,
    UsageError,
    writable_dir,
)
from tools.faults_cli.steps import load, read_sweep


def merge_command(args: argparse.Namespace) -> int:
    """The shards made one report (faults/sweep/merge.py); refused, naming the
    shard, before anything is written. Exit 0 when every fault met its
    expectation and none is left unrun, else 1 (the catalog's faults in no
    shard are said, not judged: merging --only shards is a sweep of those)."""
    from faults.report.document import write_report
    from faults.sweep.merge import NEEDED, MergeError, merged

    if len({path.resolve() for path in args.reports}) != len(args.reports):
        raise UsageError("merge: a shard is named twice")
    shards = [(path, read_sweep(path, "merge:", NEEDED, "merge")) for path in args.reports]
    writable_dir(args.results_dir, "merge: --results-dir")
    first = shards[0][1]
    stem = first.stem(args.results_dir)
    for path in args.reports:
        if path.resolve() == stem.with_suffix(".json").resolve():
            raise UsageError(f"merge: --results-dir {args.results_dir}: would overwrite {path}")
    if args.rank_mode == "auto" and first.rank_mode in {str(m) for m in RankMode}:
        args.rank_mode = first.rank_mode  # the shards' faults, as their mode made them
    try:
        report = merged(shards, load(args), rerun_wins=args.rerun_wins)
    except MergeError as error:
        raise UsageError(f"merge: {error}") from None
    write_report(args.results_dir, report)
    document = report.to_json()
    print(
        f"{len(shards)} shards merged: {len(report.faults)} faults judged, "
        f"{len(report.unrun)} not run, {len(report.not_selected)} in no shard, "
        f"mutation score {document['mutation_score']}; "
        f"reports: {stem}.json .md .xml"
    )
    return 0 if report.ok else 1


def add_parser(commands) -> None:
    merge = commands.add_parser("merge", help="a sweep's shards made one report")
    merge.add_argument("reports", metavar="SHARD", type=Path, nargs="+", help="sweep JSON reports")
    merge.add_argument("--results-dir", type=Path, required=True)
    merge.add_argument(
        "--rerun-wins",
        action="store_true",
        help="a run in two shards is the later shard's (a re-run), each replaced one listed",
    )
    merge.set_defaults(handler=merge_command)
