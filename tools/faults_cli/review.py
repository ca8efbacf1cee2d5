"""`afdep-faults review BASE [CHANGE]`: what a change does to the
synchronization (docs/review.md, "The pre-merge review")."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from faults.catalog import load_catalog
from hostio import UsageError, at_least_one, gpu_count, write_text
from tools.faults_cli.steps import (
    NO_EXPOSURE_HELP,
    SLOTS_HELP,
    ProgressLines,
    chosen_rank_mode,
    chosen_slots,
    workdir,
)


def review_command(args: argparse.Namespace) -> int:
    from faults.report.sarif import write_sarif
    from faults.review.diff import in_repo, top_prefix
    from faults.review.findings import RULES, TOOL, findings
    from faults.review.review import check_refs, markdown, review, run_review

    started = time.perf_counter()
    plain = load_catalog(args.catalog)
    mode = chosen_rank_mode(args, plain)
    needed = plain.in_rank_mode(mode).gpus_needed
    check_refs(args.root, args.base, args.change)
    if args.run and gpu_count() < needed:
        raise UsageError(
            f"review --run: the target needs {needed} GPUs, this machine has {gpu_count()}"
        )
    with workdir(args, "review") as work:
        result, catalog = review(
            args.root,
            args.base,
            args.change,
            args.catalog,
            generated=not args.no_generated,
            workdir=work.path,
            rank_mode=mode,
            older_trees=args.older_trees,
        )
        if args.run:
            if args.process_per_run:
                catalog = catalog.process_per_run()
            catalog, chosen = catalog.on_matrix()  # its [matrix], where it has one
            with shown_progress() as listener:
                result.runs = run_review(
                    result.touched,
                    catalog if args.no_exposure else catalog.with_exposure(),
                    result.tree,
                    args.root,
                    args.base,
                    work.path / "runs",
                    slots=chosen_slots(args),
                    listener=listener,
                    chosen=chosen,
                )
            work.failed = not result.runs.ok
    result.wall_s = round(time.perf_counter() - started, 1)
    text = markdown(result)
    if args.report:
        write_text(args.report, text)
    if args.sarif:
        prefix = top_prefix(args.root)
        inside = in_repo(args.catalog, args.root)  # outside: its findings name no file
        harness = prefix / inside if inside else None
        touched = {
            "sitesTouched": [cover.site.name for cover in result.touched],
            "wallSeconds": result.wall_s,
        }
        write_sarif(args.sarif, TOOL, RULES, findings(result, prefix, harness), touched)
    print(text)
    return 0 if result.ok else 1


@contextmanager
def shown_progress(clock=time.monotonic) -> Iterator:
    """The review's stages and runs as they happen, on stderr (the report is
    stdout's): a line each, led by the seconds since the review began (where
    a slow review spends them), the runs done of those planned so far and
    the time left (ProgressLines)."""
    from faults.review.progress import Event, Planned

    with ProgressLines("review --run", stderr=True, clock=clock) as progress:

        def listener(event: Event) -> None:
            progress.count(event.done, event.planned)
            progress.say(f"review --run: {event}" if isinstance(event, Planned) else str(event))

        yield listener


def add_parser(commands) -> None:
    review = commands.add_parser(
        "review", help="what BASE..CHANGE does to the synchronization (static unless --run)"
    )
    review.add_argument("base", metavar="BASE", help="the ref the change is reviewed against")
    review.add_argument(
        "change", metavar="CHANGE", nargs="?", default=None, help="a ref (default: working tree)"
    )
    review.add_argument(
        "--run",
        action="store_true",
        help="run the change's tree, then the covering faults (without it: the static review)",
    )
    review.add_argument("--report", type=Path, default=None, help="write the Markdown here")
    review.add_argument("--slots", type=at_least_one, default=None, help=SLOTS_HELP)
    review.add_argument("--sarif", type=Path, default=None, help="write the findings as SARIF")
    review.add_argument("--no-exposure", action="store_true", help=NO_EXPOSURE_HELP)
    review.add_argument(
        "--older-trees",
        action="store_true",
        help="judge a tree whose own catalog this review cannot take by --catalog, "
        "what it names that the tree lacks left out (the history's commits)",
    )
    review.set_defaults(handler=review_command)
