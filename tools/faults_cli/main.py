"""afdep-faults (python -m faults) [--catalog PATH] [--root DIR] COMMAND ...

init SOURCES          propose sites, a starter catalog and a harness for a tree
list                  the catalog's faults (site-generated ones too, unless --no-generated)
show ID               one fault, its patches (includes first)
apply ID --out DIR    a scratch tree with ID applied, to read or build by hand
run ID                apply, build, run every config (or --config), judge
sweep                 controls first, then every fault; reports and history
review BASE [CHANGE]  what a change does to the synchronization (static; --run: run it)
sites [--check] DIR   list the sites under DIR, or check their rules and contracts
corpus DIR [--run]    review every bug commit of a corpus; --results-dir writes the table
corpus --neutral R    review every real commit of range R that must be approved (--expect)
compare --left .. --right ..  sweep reports side by side (shards of a side merged)
amplify               the order-weakening mutants as litmus tests under stress
replay RUN_ID --from REPORT   one run of a sweep again, as recorded
rejudge REPORT...     sweep reports' runs judged again by today's rules (no GPU)
merge SHARD... --results-dir DIR   a sweep's shards made one report
shrink ID             the smallest run input that still kills a must-fail fault

A bad argument, path, ref, knob or catalog is refused with one line naming
it (exit 2) before any tree is built: no command writes inside the target's
sources or over a file the checkout tracks, and the target's knobs set in
the environment are checked by its [target.knobs] check. Scratch trees and
logs go to a temporary folder that is removed at the end; it is kept, and
its path printed, with --keep, when a run missed its expectation, or when
interrupted. --workdir DIR puts them in DIR, always kept. Each command is
one module of this package with its `add_parser`; this one holds the
options they share.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faults.catalog import Target
from faults.catalog.errors import FaultsError
from faults.catalog.knobs import knob_problem
from faults.catalog.load import load_target
from faults.catalog.project import NoCatalogsTable, ProjectError, default_catalog, project_catalogs
from hostio import OneLineParser, RankMode, UsageError, entry_point, refuse_output, writable_dir
from tools.faults_cli import (
    amplify,
    apply,
    compare,
    corpus,
    init,
    listing,
    merge,
    rejudge,
    replay,
    review,
    run,
    shrink,
    sites,
    sweep,
)
from tools.faults_cli.steps import program

# Each subcommand's module, in the order `--help` lists them.
COMMANDS = (
    init,
    sites,
    listing,
    apply,
    run,
    sweep,
    review,
    corpus,
    compare,
    amplify,
    replay,
    rejudge,
    merge,
    shrink,
)


def parser() -> OneLineParser:
    top = OneLineParser(
        prog=program(),
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument(
        "--catalog", type=Path, default=None, help="default: the first of [tool.faults] catalogs"
    )
    top.add_argument("--root", type=Path, default=None, help="the user's tree (default: its top)")
    top.add_argument("--workdir", type=Path, default=None, help="scratch trees and logs (kept)")
    top.add_argument("--keep", action="store_true", help="keep the temporary scratch folder")
    top.add_argument(
        "--rank-mode",
        choices=["auto", *(str(mode) for mode in RankMode)],
        default="auto",
        help="per-gpu: a GPU per rank; logical: every rank on one GPU "
        "(auto: logical when there are GPUs, fewer than the target's ranks)",
    )
    top.add_argument(
        "--no-generated", action="store_true", help="leave out the faults generated from sites"
    )
    top.add_argument(
        "--process-per-run",
        action="store_true",
        help="start a process for every run, not the target's warm workers ([target.serve])",
    )
    commands = top.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for command in COMMANDS:
        command.add_parser(commands)
    return top


def project_root(start: Path) -> Path:
    """The nearest folder at or above `start` whose pyproject.toml lists fault
    catalogs (so the commands work from any subdirectory); else `start`."""
    for folder in (start, *start.parents):
        try:
            project_catalogs(folder)
            return folder
        except NoCatalogsTable:
            continue
        except ProjectError:
            return folder  # found, and malformed: default_catalog says how
    return start


def check_inputs(args: argparse.Namespace) -> None:
    """The tree and catalog the user named are there, before any work."""
    if args.root is not None and not args.root.is_dir():
        raise UsageError(f"--root {args.root}: not a directory")
    if args.catalog is not None and not args.catalog.is_file():
        raise UsageError(f"--catalog {args.catalog}: not a file")


def check_paths(args: argparse.Namespace) -> None:
    """The paths the user named are what they must be, before any work
    (where the command may write at all: refuse_outputs, first)."""
    check_inputs(args)
    if args.workdir is not None:
        writable_dir(args.workdir, "--workdir")
    outputs = {name: getattr(args, name, None) for name in ("report", "sarif")}
    for name, output in outputs.items():
        if output is not None:
            if not output.parent.exists():  # a typo'd path is refused, never made
                raise UsageError(f"--{name} {output}: its folder {output.parent} does not exist")
            writable_dir(output.parent, f"--{name}'s folder")
            if output.is_dir():
                raise UsageError(f"--{name} {output}: a directory, not a file")
    if None not in outputs.values() and len({p.resolve() for p in outputs.values()}) == 1:
        raise UsageError(f"--report and --sarif name one file: {outputs['sarif']}")


def commands_target(args: argparse.Namespace) -> Target | None:
    """The [target] of the catalog the command works with, read alone (what
    the doors need: its sources, its knobs); for a command that needs no
    catalog and was given none (init, sites), the project's, if it has one."""
    catalog = args.catalog
    if catalog is None:
        try:
            catalog = default_catalog(args.root)
        except FaultsError:
            return None
    return load_target(catalog)


# Every path a command may write, by its argument's name. A command whose
# output is a stem declares the files it names (replay: `stems`).
OUTPUTS = ("workdir", "report", "sarif", "results_dir", "out", "history")


def refuse_outputs(args: argparse.Namespace, target: Target | None) -> None:
    """Every path the command would write held to hostio.output_problem's one
    rule, before any folder is made: never inside the target's sources (the
    catalog's, and the tree a command takes as its sources: init's), never
    over a file the checkout tracks."""
    sources = [args.root / target.sources] if target is not None else []
    if isinstance(getattr(args, "sources", None), str):
        sources.append(Path(args.sources))
    stems = getattr(args, "stems", {})
    for name in OUTPUTS:
        value = getattr(args, name, None)
        if isinstance(value, Path):
            argument = "--" + name.replace("_", "-")
            for path in [value.with_suffix(s) for s in stems.get(name, ())] or [value]:
                refuse_output(path, argument, sources)


def check_knobs(args: argparse.Namespace, target: Target | None) -> None:
    """The target's knobs in this environment, by its own check ([target.knobs])."""
    if target is not None and target.knobs is not None:
        problem = knob_problem(target.knobs, args.root)
        if problem is not None:
            raise UsageError(problem)


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        check_inputs(args)
        args.root = (args.root or project_root(Path.cwd().resolve())).resolve()
        if args.catalog is None and getattr(args, "needs_catalog", True):
            args.catalog = default_catalog(args.root)
        target = commands_target(args)
        refuse_outputs(args, target)  # before any folder is made
        check_knobs(args, target)
        check_paths(args)
        return args.handler(args)
    except (FaultsError, UsageError) as error:  # bad input: one line, exit 2
        print(f"{program()}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
