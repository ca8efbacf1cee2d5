"""`afdep-faults sites [--check] DIR`: the sites under DIR, or their rules
and publish contracts checked (docs/synchronization.md, "The publish contract")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faults.catalog import Catalog, load_catalog
from faults.catalog.project import folder_anchors, folder_catalog
from hostio import (
    UsageError,
)
from invariants.sync.sites import SourceTree
from invariants.sync.spellings import primitive_pattern


# --------------------------------------------------------------------- commands
def sites_command(args: argparse.Namespace) -> int:
    from invariants.sync.sites import SOURCE_SUFFIXES, source_files

    if not Path(args.dir).exists():
        raise UsageError(f"sites: {args.dir}: no such file or directory")
    if not source_files(Path(args.dir)):
        raise UsageError(f"sites: {args.dir}: no source file under it")
    catalog = sources_catalog(args)  # loaded once: the anchors, the words, the contract
    spellings = catalog.target.contract if catalog is not None else None
    try:
        primitives = primitive_pattern(spellings)  # the target's words too
        anchors = folder_anchors(catalog, args.root, Path(args.dir))
        parsed = SourceTree(Path(args.dir), anchors, primitives)
        sites, violations = parsed.sites, parsed.violations
    except UnicodeDecodeError as error:
        raise UsageError(f"sites: {args.dir}: not a text source ({error.reason})") from None
    if Path(args.dir).is_file() and Path(args.dir).suffix not in SOURCE_SUFFIXES:
        raise UsageError(
            f"sites: {args.dir}: not a source file (a source ends in "
            f"{', '.join(SOURCE_SUFFIXES[:-1])} or {SOURCE_SUFFIXES[-1]})"
        )
    if not args.check:
        for site in sites:
            contract = {
                "producers": site.producers and site.producers.value,
                "consumers": site.consumers and site.consumers.value,
                "scope": site.scope and site.scope.value,
                "guards": site.guards,
            }
            said = "".join(f" {key}={value}" for key, value in contract.items() if value)
            span = f"{site.lines.start}-{site.lines.stop - 1}"
            print(f"{site.name:28} {site.kind:8} {site.path}:{span}{said}")
    for violation in violations:
        print(violation, file=sys.stderr)
    if not args.check:
        return 1 if violations else 0
    broken = len(violations) + contract_check(args, catalog, parsed)
    state = "ok" if not broken else f"{broken} violation(s)"
    print(f"{len(sites)} sites in {args.dir}: {state}")
    return 1 if broken else 0


def contract_check(args: argparse.Namespace, catalog: Catalog | None, parsed: SourceTree) -> int:
    """The publish contract of the sources under DIR (docs/synchronization.md, "The
    publish contract"), when their catalog has [target.contract]: on the source,
    and on the PTX unless --no-ptx. Its violations are printed and counted.
    `parsed`: DIR's sources, read already."""
    from invariants.sync.contract import check_contracts
    from invariants.sync.ptx_read import PtxError

    if catalog is None or catalog.target.contract is None or not Path(args.dir).is_dir():
        return 0
    cache = args.workdir / "ptx" if args.workdir is not None else None
    try:
        report = check_contracts(
            args.root,
            catalog.target,
            ptx=not args.no_ptx,
            sources=parsed.with_anchors(catalog.target.anchors),
            cache=cache,
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
    return folder_catalog(args.root, Path(args.dir))


def add_parser(commands) -> None:
    sites = commands.add_parser("sites", help="list the sites under DIR, or --check their rules")
    sites.add_argument("dir", help="a source directory (the catalog's sources) or one file")
    sites.add_argument("--check", action="store_true", help="exit 1 naming each violation")
    sites.add_argument(
        "--no-ptx", action="store_true", help="check the publish contract on the source only"
    )
    sites.set_defaults(handler=sites_command, needs_catalog=False)
