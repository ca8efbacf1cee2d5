"""python -m faults [--catalog PATH] [--root DIR] COMMAND ...

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
rejudge REPORT...     sweep reports' runs judged again by today's rules (no GPU)
merge SHARD... --results-dir DIR   a sweep's shards made one report

A bad argument, path, ref or catalog is refused with one line naming it
(exit 2) before any tree is built. Scratch trees and logs go to a temporary
folder that is removed at the end; it is kept, and its path printed, with
--keep, when a run missed its expectation, or when interrupted. --workdir DIR
puts them in DIR, always kept.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from faults.amplify.cli import add_amplify_command
from faults.catalog import Catalog, CatalogError, load_catalog
from faults.catalog_types import RankMode
from faults.cli_review import add_review_commands
from faults.cli_science import add_science_commands, rest_of, sweep_seeds
from faults.cli_shrink import add_shrink_command
from faults.cli_steps import load, workdir
from faults.project import NoCatalogsTable, ProjectError, default_catalog, project_catalogs
from faults.scratch import make_scratch
from hostio import (
    OneLineParser,
    UsageError,
    at_least_one,
    entry_point,
    gpu_count,
    machine_name,
    positive_seconds,
    writable_dir,
    write_json,
)
from invariants.sync.sites import parse_tree


def fitting_configs(catalog: Catalog, names: list[str] | None) -> list[str]:
    """The chosen configs (all by default) that fit this machine's GPUs; the
    others are said. None fitting is an error naming what each needs."""
    from faults.sweep import select_configs

    chosen = select_configs(catalog, names)
    needs = {c.name: catalog.gpus_for(c) for c in chosen}
    gpus = gpu_count() if any(needs.values()) else 0
    fitting = [name for name, need in needs.items() if need <= gpus]
    if not fitting:
        raise UsageError(
            f"no chosen config fits this machine's {gpus} GPUs: "
            + ", ".join(f"{name} needs {need}" for name, need in needs.items())
        )
    for name, need in needs.items():
        if need > gpus:
            print(f"not run here: config {name} needs {need} GPUs")
    return fitting


# --------------------------------------------------------------------- commands
def sites_command(args: argparse.Namespace) -> int:
    from invariants.sync.sites import source_files

    if not Path(args.dir).exists():
        raise UsageError(f"sites: {args.dir}: no such file or directory")
    if not source_files(Path(args.dir)):
        raise UsageError(f"sites: {args.dir}: no source file under it")
    try:
        sites, violations = parse_tree(Path(args.dir))
    except UnicodeDecodeError as error:
        raise UsageError(f"sites: {args.dir}: not a text source ({error.reason})") from None
    if not args.check:
        for site in sites:
            contract = {
                "producers": site.producers and site.producers.value,
                "consumers": site.consumers and site.consumers.value,
                "scope": site.scope and site.scope.value,
                "guards": site.guards,
            }
            said = "".join(f" {key}={value}" for key, value in contract.items() if value)
            print(f"{site.name:28} {site.kind:8} {site.path}:{site.start}-{site.end}{said}")
    for violation in violations:
        print(violation, file=sys.stderr)
    if not args.check:
        return 1 if violations else 0
    broken = len(violations) + contract_check(args)
    state = "ok" if not broken else f"{broken} violation(s)"
    print(f"{len(sites)} sites in {args.dir}: {state}")
    return 1 if broken else 0


def contract_check(args: argparse.Namespace) -> int:
    """The publish contract of the sources under DIR (docs/architecture.md, "The
    publish contract"), when their catalog has [target.contract]: on the source,
    and on the PTX unless --no-ptx. Its violations are printed and counted."""
    from invariants.sync.contract import check_contracts
    from invariants.sync.ptx_read import PtxError

    catalog = sources_catalog(args)
    if catalog is None or catalog.target.contract is None or not Path(args.dir).is_dir():
        return 0
    cache = args.workdir / "ptx" if args.workdir is not None else None
    try:
        report = check_contracts(
            args.root, catalog.target, ptx=not args.no_ptx, sources=Path(args.dir), cache=cache
        )
    except PtxError as error:
        raise UsageError(f"sites: the contract's PTX: {error}") from None
    for violation in report.violations:
        print(violation, file=sys.stderr)
    how = "cached" if report.ptx_cached else "compiled"
    ptx = f"{report.variants_checked} variants, PTX {how} {report.ptx_seconds:.1f} s"
    if args.no_ptx or not catalog.target.contract.ptx:
        ptx = "source only"
    state = "ok" if report.ok else f"{len(report.violations)} violation(s)"
    print(f"contract of {report.sites_checked} releases and waits ({ptx}): {state}")
    return len(report.violations)


def sources_catalog(args: argparse.Namespace) -> Catalog | None:
    """--catalog, else the project's catalog whose target's sources hold DIR
    (None: no catalog names them, and the site rules are all there is)."""
    if args.catalog is not None:
        return load_catalog(args.catalog, tree_root=args.root)
    try:
        paths = project_catalogs(args.root)
    except ProjectError:
        return None
    where = Path(args.dir).resolve()
    for path in paths:
        catalog = load_catalog(path, tree_root=args.root)
        sources = (args.root / catalog.target.sources).resolve()
        if where == sources or sources in where.parents:
            return catalog
    return None


def list_command(args: argparse.Namespace) -> int:
    catalog = load(args)
    for fault in catalog.faults.values():
        includes = f" (includes {', '.join(fault.includes)})" if fault.includes else ""
        print(f"{fault.id:8} expect={fault.expect:4} {fault.title}{includes}")
    print(f"configs: {', '.join(c.name for c in catalog.configs)}")
    return 0


def show_command(args: argparse.Namespace) -> int:
    catalog = load(args)
    fault = catalog.fault(args.id)
    print(f"{fault.id}: {fault.title}\nexpect: {fault.expect}")
    if fault.survivor_ok:
        print(f"known survivor: {fault.survivor_ok}")
    for patch in catalog.all_patches(fault.id):
        if patch.file:
            where = patch.marker_site or "the site that holds it"
            print(
                f"  [{patch.owner}] text patch in {patch.file}: {patch.old!r} -> {patch.new!r}"
                f" marker ({patch.marker}) in {where}"
            )
        else:
            detail = f" {patch.ns} ns at {patch.at} when ({patch.when})" if patch.ns else ""
            print(f"  [{patch.owner}] {patch.action} {patch.site}{detail} marker ({patch.marker})")
    return 0


def apply_command(args: argparse.Namespace) -> int:
    from faults.apply import ApplyError, apply_fault

    catalog = load(args)
    catalog.fault(args.id)
    if args.out.exists():
        raise UsageError(f"apply: --out {args.out} exists: give a new directory")
    writable_dir(args.out.parent, "apply: --out's folder")
    make_scratch(args.root, args.out)
    try:
        patched = apply_fault(args.out, catalog, args.id)
    except ApplyError as error:  # nothing half-patched stays behind
        shutil.rmtree(args.out, ignore_errors=True)
        raise UsageError(f"apply {args.id}: {error}") from None
    for path in patched:
        print(f"patched {path}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    from faults.engine import Engine
    from faults.report import report_document, summary_line

    catalog = load(args)
    catalog.fault(args.id)  # an unknown id is named before any GPU question
    configs = catalog.configs_for(args.id, fitting_configs(catalog, args.config))
    if not configs:
        raise UsageError(
            f"run: fault {args.id} runs under {list(catalog.fault(args.id).configs)}, "
            "none of them chosen or fitting here"
        )
    started = time.perf_counter()
    with workdir(args, "run") as work:
        engine = Engine(catalog, args.root, work.path)
        with engine.guard() as guard:
            results = engine.evaluate(args.id, configs, args.repeat)
        work.failed = not all(r.ok for r in results)
        for result in results:
            print(summary_line(result))
    if args.report:
        document = report_document(
            catalog=str(args.catalog),
            target=catalog.target.name,
            user_digest=guard.before,
            machine=machine_name(),
            rank_mode=str(catalog.rank_mode),
            controls=[],
            results=results,
            wall_s=time.perf_counter() - started,
            harness_ok=None,  # `run` runs no controls: the harness is not checked
        )
        write_json(args.report, document)
    return 0 if all(r.ok for r in results) else 1


def sweep_command(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from faults.report.markdown import markdown
    from faults.sweep import Sweep, SweepOptions

    rest_of(args)
    catalog = load(args)
    options = SweepOptions(
        args.only, args.config, args.repeat, args.slots, args.results_dir, args.history
    )
    options.exposure = not args.no_exposure
    options.budget_s = args.budget_s
    options.seeds = sweep_seeds(args)
    with workdir(args, "sweep") as work:
        plan = Sweep.plan(catalog, args.root, work.path, options, gpu_count())
        with Progress(transient=True) as progress:
            task = progress.add_task("faults", total=len(plan.fault_ids))

            def say(line: str) -> None:
                progress.console.print(line, soft_wrap=True, markup=False, highlight=False)

            plan.run(say, lambda: progress.advance(task))
        document = plan.document()
        work.failed = not plan.ok(document)
    unrecorded = plan.record(document)
    stem = plan.write(document)
    print(markdown(document))
    if unrecorded:
        print(unrecorded)
    print(f"reports: {stem}.json .md .xml")
    return 0 if plan.ok(document) else 1


# ----------------------------------------------------------------------- parser
def add_catalog_commands(commands) -> None:
    """sites, list, show, apply, run and sweep, on the top parser's subcommands."""
    sites = commands.add_parser("sites", help="list the sites under DIR, or --check their rules")
    sites.add_argument("dir", help="a source directory (the catalog's sources) or one file")
    sites.add_argument("--check", action="store_true", help="exit 1 naming each violation")
    sites.add_argument(
        "--no-ptx", action="store_true", help="check the publish contract on the source only"
    )
    sites.set_defaults(handler=sites_command)
    commands.add_parser("list").set_defaults(handler=list_command)
    show = commands.add_parser("show")
    show.add_argument("id")
    show.set_defaults(handler=show_command)
    apply = commands.add_parser("apply")
    apply.add_argument("id")
    apply.add_argument("--out", type=Path, required=True)
    apply.set_defaults(handler=apply_command)
    run = commands.add_parser("run")
    run.add_argument("id")
    run.add_argument("--report", type=Path, default=None, help="the JSON report")
    sweep = commands.add_parser("sweep")
    sweep.add_argument(
        "--only", action="append", default=None, help="a regular expression matching whole ids"
    )
    sweep.add_argument(
        "--slots",
        type=at_least_one,
        default=1,
        help="must-pass faults run this many at a time per GPU group (must-fail: one)",
    )
    sweep.add_argument("--results-dir", type=Path, default=None)
    sweep.add_argument("--history", type=Path, default=None, help="SQLite history")
    sweep.add_argument(
        "--no-exposure", action="store_true", help="leave out the configs' real-size twins"
    )
    sweep.add_argument(
        "--budget-s",
        type=positive_seconds,
        default=None,
        help="start no fault after this long; the report names those not run",
    )
    for command, function in ((run, run_command), (sweep, sweep_command)):
        command.add_argument("--config", action="append", default=None)
        command.add_argument("--repeat", type=at_least_one, default=1)
        command.set_defaults(handler=function)


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
    commands = top.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    add_catalog_commands(commands)
    add_review_commands(commands)
    add_science_commands(commands)
    add_shrink_command(commands)
    add_amplify_command(commands)
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


def check_paths(args: argparse.Namespace) -> None:
    """The paths the user named are what they must be, before any work."""
    if args.root is not None and not args.root.is_dir():
        raise UsageError(f"--root {args.root}: not a directory")
    if args.catalog is not None and not args.catalog.is_file():
        raise UsageError(f"--catalog {args.catalog}: not a file")
    if args.workdir is not None:
        writable_dir(args.workdir, "--workdir")
    outputs = {name: getattr(args, name, None) for name in ("report", "sarif")}
    for name, output in outputs.items():
        if output is not None:
            writable_dir(output.parent, f"--{name}'s folder")
            if output.is_dir():
                raise UsageError(f"--{name} {output}: a directory, not a file")
    if None not in outputs.values() and len({p.resolve() for p in outputs.values()}) == 1:
        raise UsageError(f"--report and --sarif name one file: {outputs['sarif']}")


def program() -> str:
    """The name the user typed: the console script's, else `python -m faults`."""
    name = Path(sys.argv[0]).name
    return "python -m faults" if name in ("__main__.py", "-c", "") else name


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        check_paths(args)
        args.root = (args.root or project_root(Path.cwd().resolve())).resolve()
        if args.catalog is None and args.handler is not sites_command:
            args.catalog = default_catalog(args.root)
        return args.handler(args)
    except (CatalogError, ProjectError, UsageError) as error:
        print(f"{program()}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
