"""afdep validate's arguments: the parser, --only's pattern, and the runs
of the matrix that --select and --only choose."""

from __future__ import annotations

import argparse
import re

from hostio import RESULTS_DIR, OneLineParser, UsageError, at_least, at_least_one
from tools.driver.launch import folder
from tools.validate.matrix import Group, Run
from tools.validate.modes import RANK_MODE_CHOICES


def argument_parser(description: str) -> OneLineParser:
    """afdep validate's parser (`description`: its help's text)."""
    parser = OneLineParser(prog="afdep validate", description=description)
    parser.add_argument(
        "--select",
        choices=["all", *(group.value for group in Group)],
        default="all",
    )
    parser.add_argument(
        "--only", type=regular_expression, default=None, help="regular expression over run names"
    )
    parser.add_argument("--results-dir", type=folder, default=RESULTS_DIR)
    parser.add_argument(
        "--logs-dir", type=folder, default=None, help="kept (default: a temporary folder)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary logs folder")
    parser.add_argument("--bench-iters", type=at_least(0), default=50)
    parser.add_argument(
        "--jobs",
        type=at_least_one,
        default=1,
        help="driver runs at a time on the same GPUs (timed runs still run alone)",
    )
    parser.add_argument(
        "--rank-mode",
        choices=RANK_MODE_CHOICES,
        default="auto",
        help="per-gpu: a rank per GPU under torchrun; logical: every rank of a run in one "
        "process on one GPU; auto: logical on exactly one GPU, per-gpu on two or more",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="skip the selected runs this tree's document already records (a validation cut "
        "off by a time limit goes on where it stopped)",
    )
    parser.add_argument("--list", action="store_true", help="print the runs and exit")
    return parser


def regular_expression(text: str) -> re.Pattern:
    try:
        return re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {error}") from None


def selected(args: argparse.Namespace, matrix: list[Run]) -> list[Run]:
    """The runs of --select whose names --only matches; none is a usage error."""
    runs = [
        run
        for run in matrix
        if args.select in ("all", run.group) and (args.only is None or args.only.search(run.name))
    ]
    if not runs:  # every group has runs: only --only can leave none
        within = "" if args.select == "all" else f" of --select {args.select}"
        raise UsageError(f"--only {args.only.pattern!r} matches no run{within}")
    return runs
