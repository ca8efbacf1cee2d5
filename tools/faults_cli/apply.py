"""`afdep-faults apply ID --out DIR`: a scratch tree with ID applied, to read
or build by hand; nothing half-patched is left behind."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from faults.pipeline.scratch import target_scratch
from hostio import (
    UsageError,
    writable_dir,
)
from tools.faults_cli.steps import load


def apply_command(args: argparse.Namespace) -> int:
    from faults.pipeline.apply import ApplyError, apply_fault

    catalog = load(args)
    catalog.fault(args.id)
    if args.out.exists():
        raise UsageError(f"apply: --out {args.out} exists: give a new directory")
    writable_dir(args.out.parent, "apply: --out's folder")
    sources = target_scratch(args.root, args.out, catalog.target)
    try:
        patched = apply_fault(sources, catalog, args.id)
    except ApplyError as error:  # nothing half-patched stays behind
        shutil.rmtree(args.out, ignore_errors=True)
        raise UsageError(f"apply {args.id}: {error}") from None
    for path in patched:
        print(f"patched {path}")
    return 0


def add_parser(commands) -> None:
    apply = commands.add_parser("apply")
    apply.add_argument("id")
    apply.add_argument("--out", type=Path, required=True)
    apply.set_defaults(handler=apply_command)
