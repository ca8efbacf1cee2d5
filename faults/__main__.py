"""python -m faults sites [--check] DIR"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from faults.sites import parse_tree


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m faults")
    commands = parser.add_subparsers(dest="command", required=True)
    sites = commands.add_parser("sites", help="list the sites under DIR, or --check their rules")
    sites.add_argument("root", help="a source directory (afdep/csrc) or one file")
    sites.add_argument(
        "--check", action="store_true", help="exit 1 naming file:line of each violation"
    )
    sites.set_defaults(run=sites_command)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
