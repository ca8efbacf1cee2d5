"""`afdep-faults init SOURCES`: a source tree scanned for ordering
primitives, its sites proposed as anchors, and a starter catalog printed (or
written with a harness skeleton under --out) (docs/tools.md, "Onboarding a codebase")."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from faults.init import (
    CONTRACT_KEYS,
    declared_sites,
    harness_skeleton,
    proposed,
    scan,
    starter_catalog,
    undeclared,
    unproposed,
)
from hostio import UsageError, known_names
from invariants.sync.sites import source_files
from invariants.sync.spellings import call_pattern
from tools.faults_cli.steps import program

NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def spelling(text: str) -> tuple[str, str]:
    """An argparse type: KEY=REGEX, KEY a [target.contract] key, REGEX compiling."""
    key, equals, regex = text.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"KEY=REGEX, got {text!r}")
    if key not in CONTRACT_KEYS:
        known = known_names(key, CONTRACT_KEYS, "docs/synchronization.md")
        raise argparse.ArgumentTypeError(f"{key!r} is not a contract key; {known}")
    try:
        call_pattern(regex)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{key}: {error}") from None
    return key, regex


def init_command(args: argparse.Namespace) -> int:
    sources = Path(args.sources)
    if not sources.exists():
        raise UsageError(f"init: {args.sources}: no such file or directory")
    if not source_files(sources):
        raise UsageError(f"init: {args.sources}: no source file under it")
    if not NAME.match(args.name):
        raise UsageError(f"init: --name {args.name!r}: a lower_case name (a-z, 0-9, _)")
    outputs = []
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"init: --out {args.out}: exists and is not a folder")
    if args.out is not None:
        outputs = [args.out / f"{args.name}.toml", args.out / "harness.cu"]
        taken = [str(path) for path in outputs if path.exists()]
        if taken:
            raise UsageError(f"init: {taken[0]}: exists; init never overwrites a file")
    given: dict[str, str] = {}
    for key, regex in args.spelling:
        given[key] = f"{given[key]}|{regex}" if key in given else regex
    found = scan(sources, given)
    every, overlapped = proposed(found)
    declared = declared_sites(found)
    proposals, skipped = undeclared(found, every, declared)
    missing = unproposed(found, proposals, overlapped, declared)
    from_root = _from_root(sources, args.root)
    catalog = starter_catalog(
        found, proposals, args.name, from_root, program(), skipped, missing
    )
    if args.out is None:
        print(catalog, end="")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    outputs[0].write_text(catalog)
    outputs[1].write_text(harness_skeleton(args.name, next(iter(found.files), ""), program()))
    written = f"{outputs[0]}, {outputs[1]}"
    left_out = f", {skipped} left out over the tree's own sites" if skipped else ""
    unlisted = f"; {len(missing)} uses not proposed, each listed there with why" if missing else ""
    print(
        f"{len(proposals)} sites proposed from {len(found.uses)} uses{left_out}: {written}"
        f"{unlisted}"
    )
    return 0


def _from_root(sources: Path, root: Path) -> str:
    """SOURCES as the catalog names it: from the project's root when under it."""
    try:
        return sources.resolve().relative_to(root).as_posix()
    except ValueError:
        return sources.as_posix()


def add_parser(commands) -> None:
    init = commands.add_parser(
        "init", help="propose sites and a starter catalog for a source tree"
    )
    init.add_argument("sources", help="the tree (or one file) of CUDA/C++ sources to scan")
    init.add_argument(
        "--spelling",
        type=spelling,
        action="append",
        default=[],
        metavar="KEY=REGEX",
        help="a [target.contract] spelling (release.sys, barrier.block, store...), "
        "over CUDA's default for that key; repeatable",
    )
    init.add_argument("--name", default="target", help="the target's name (default: target)")
    init.add_argument(
        "--out", type=Path, default=None, help="write <name>.toml and harness.cu here"
    )
    init.set_defaults(handler=init_command, needs_catalog=False)
