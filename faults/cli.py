"""python -m faults [--catalog PATH] {list,show,apply,run,sweep,sites} ...

list                  the catalog's faults
show ID               one fault, its patches (includes first) and their code
apply ID --out DIR    a scratch tree with ID applied, to read or build by hand
run ID                apply, build, run every config (or --config), judge
sweep                 controls first, then every fault, with a progress bar
sites [--check] DIR   list the sites under DIR, or check their rules
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from faults.catalog import Catalog, CatalogError, load_catalog
from faults.scratch import make_scratch
from faults.sites import parse_tree
from hostio import at_least_one, entry_point, gpu_count

DEFAULT_CATALOG = Path("catalogs/afdep.toml")


def sites_command(args: argparse.Namespace) -> int:
    if not Path(args.root).exists():
        print(f"no such file or directory: {args.root}", file=sys.stderr)
        return 2
    sites, violations = parse_tree(Path(args.root))
    if not args.check:
        for site in sites:
            guards = f" guards={site.guards}" if site.guards else ""
            print(f"{site.name:28} {site.kind:8} {site.path}:{site.start}-{site.end}{guards}")
    for violation in violations:
        print(violation, file=sys.stderr)
    if args.check:
        state = "ok" if not violations else f"{len(violations)} violation(s)"
        print(f"{len(sites)} sites in {args.root}: {state}")
    return 1 if violations else 0


def _catalog(args: argparse.Namespace) -> Catalog:
    catalog = load_catalog(args.catalog, tree_root=args.root)
    from faults.generate import is_generated, with_generated

    if args.generated or is_generated(getattr(args, "id", "") or ""):
        catalog = with_generated(catalog, args.root)
    return catalog


def list_command(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    for fault in catalog.faults.values():
        includes = f" (includes {', '.join(fault.includes)})" if fault.includes else ""
        print(f"{fault.id:8} expect={fault.expect:4} {fault.title}{includes}")
    print(f"configs: {', '.join(c.name for c in catalog.configs)}")
    return 0


def show_command(args: argparse.Namespace) -> int:
    catalog = _catalog(args)
    fault = catalog.fault(args.id)
    print(f"{fault.id}: {fault.title}\nexpect: {fault.expect}")
    if fault.survivor_ok:
        print(f"known survivor: {fault.survivor_ok}")
    for patch in catalog.all_patches(fault.id):
        if patch.file:
            print(f"  [{patch.owner}] text patch in {patch.file}: {patch.old!r} -> {patch.new!r}")
        else:
            detail = f" {patch.ns} ns at {patch.at} when ({patch.when})" if patch.ns else ""
            print(f"  [{patch.owner}] {patch.action} {patch.site}{detail} marker ({patch.marker})")
    return 0


def apply_command(args: argparse.Namespace) -> int:
    from faults.apply import apply_fault

    catalog = _catalog(args)
    catalog.fault(args.id)
    if args.out.exists():
        print(f"--out {args.out} exists: give a new directory", file=sys.stderr)
        return 2
    make_scratch(args.root, args.out)
    for path in apply_fault(args.out, catalog, args.id):
        print(f"patched {path}")
    return 0


def _engine(args: argparse.Namespace, catalog: Catalog):
    from faults.engine import Engine

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="afdep-faults-"))
    return Engine(catalog, args.root, workdir, ref=args.ref)


def _configs(catalog: Catalog, names: list[str] | None) -> list[str]:
    """The named configs (all by default) that fit this machine's GPUs; the
    others are said and left out. None fitting is an error naming the need."""
    chosen = [catalog.config(name) for name in names] if names else list(catalog.configs)
    needs = {c.name: catalog.gpus_for(c) for c in chosen}
    gpus = gpu_count() if any(needs.values()) else 0
    fitting = [name for name, need in needs.items() if need <= gpus]
    if not fitting:
        raise CatalogError(
            f"{catalog.path}: no chosen config fits this machine's {gpus} GPUs: "
            + ", ".join(f"{name} needs {need}" for name, need in needs.items())
        )
    for name, need in needs.items():
        if need > gpus:
            print(f"not run here: config {name} needs {need} GPUs")
    return fitting


def run_command(args: argparse.Namespace) -> int:
    from faults.report import report_document, summary_line
    from hostio import write_json

    catalog = _catalog(args)
    engine = _engine(args, catalog)
    started = time.perf_counter()
    with engine.guard() as guard:
        configs = catalog.configs_for(args.id, _configs(catalog, args.config))
        if not configs:
            raise CatalogError(
                f"{catalog.path}: fault {args.id} runs under {list(catalog.fault(args.id).configs)}"
                f", none of them chosen or fitting here"
            )
        results = engine.evaluate(args.id, configs, args.repeat)
    for result in results:
        print(summary_line(result))
    if args.report:
        write_json(
            args.report,
            report_document(
                catalog=str(args.catalog),
                target=catalog.target.name,
                user_digest=guard.before,
                controls=[],
                results=results,
                wall_s=time.perf_counter() - started,
                harness_ok=True,
            ),
        )
    print(f"logs and trees: {engine.workdir}")
    return 0 if all(r.ok for r in results) else 1


def sweep_command(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    from faults.engine import sweep
    from faults.report import report_document, summary_line
    from hostio import write_json

    catalog = _catalog(args)
    engine = _engine(args, catalog)
    names = _configs(catalog, args.config)
    fault_ids = [f for f in catalog.faults if not args.only or f in args.only]
    for fault_id in [f for f in fault_ids if not catalog.configs_for(f, names)]:
        print(f"not run: fault {fault_id} has no config among {names}")
    started = time.perf_counter()
    with engine.guard() as guard, Progress(transient=True) as progress:
        task = progress.add_task("faults", total=len(fault_ids) + 1)

        def on_results(found) -> None:
            for result in found:
                progress.console.print(
                    summary_line(result), soft_wrap=True, markup=False, highlight=False
                )
            progress.advance(task)

        controls, results = sweep(
            [engine], fault_ids, names, args.repeat, on_results, slots=args.slots
        )
        harness_ok = all(r.ok for r in controls)
        if not harness_ok:
            progress.console.print("HARNESS BROKEN: a control is wrong, no fault is judged")
    document = report_document(
        catalog=str(args.catalog),
        target=catalog.target.name,
        user_digest=guard.before,
        controls=controls,
        results=results,
        wall_s=time.perf_counter() - started,
        harness_ok=harness_ok,
    )
    if args.report:
        write_json(args.report, document)
        print(f"report: {args.report}")
    for result in (*controls, *results):
        if result.outcome:
            print(f"{result.outcome['log_sha256']} {Path(result.outcome['log_path']).name}")
    stages = document["stage_seconds"]
    print(
        f"apply {stages['apply']} s, build {stages['build']} s, run {stages['run']} s, "
        f"judge {stages['judge']} s, "
        f"engine share {document['engine_share']:.1%}; logs and trees: {engine.workdir}"
    )
    return 0 if document["ok"] else 1


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m faults",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    parser.add_argument("--root", type=Path, default=Path("."), help="the user's tree")
    parser.add_argument("--ref", default=None, help="a git ref to build scratch trees from")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch trees and logs")
    parser.add_argument(
        "--generated",
        action="store_true",
        help="add the faults generated from every site (ids gen.skip.*, gen.delay.*)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    sites = commands.add_parser("sites", help="list the sites under DIR, or --check their rules")
    sites.add_argument("root", help="a source directory (afdep/csrc) or one file")
    sites.add_argument("--check", action="store_true", help="exit 1 naming each violation")
    sites.set_defaults(run=sites_command)
    commands.add_parser("list").set_defaults(run=list_command)
    show = commands.add_parser("show")
    show.add_argument("id")
    show.set_defaults(run=show_command)
    apply = commands.add_parser("apply")
    apply.add_argument("id")
    apply.add_argument("--out", type=Path, required=True)
    apply.set_defaults(run=apply_command)
    for name, function in (("run", run_command), ("sweep", sweep_command)):
        command = commands.add_parser(name)
        if name == "run":
            command.add_argument("id")
        else:
            command.add_argument("--only", nargs="+", default=None, help="fault ids")
            command.add_argument(
                "--slots",
                type=at_least_one,
                default=1,
                help="must-pass faults run this many at a time on the GPUs (must-fail: one)",
            )
        command.add_argument("--config", action="append", default=None)
        command.add_argument("--repeat", type=int, default=1)
        command.add_argument("--report", type=Path, default=None)
        command.set_defaults(run=function)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except CatalogError as error:
        print(f"catalog error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
