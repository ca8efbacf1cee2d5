"""`afdep-faults list` and `show ID`: the catalog's faults, and one fault's
patches (its includes first)."""

from __future__ import annotations

import argparse

from tools.faults_cli.steps import load


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


def add_parser(commands) -> None:
    commands.add_parser("list").set_defaults(handler=list_command)
    show = commands.add_parser("show")
    show.add_argument("id")
    show.set_defaults(handler=show_command)
