"""What every `afdep-faults` command shares: the catalog as the command sees
it (generated faults, rank mode), its working folder, the configs that fit
this machine, a sweep report read back, and the name the user typed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from faults.catalog import Catalog, load_catalog
from faults.catalog.errors import FaultsError
from faults.generate.site_faults import with_generated
from faults.report.document import REQUIRED, ReportError, SweepReport, read_report
from hostio import (
    KeptFolder,
    RankMode,
    UsageError,
    gpu_count,
)


def load(args: argparse.Namespace) -> Catalog:
    catalog = load_catalog(args.catalog, tree_root=args.root)
    catalog = catalog.in_rank_mode(chosen_rank_mode(args, catalog))
    if args.process_per_run:
        catalog = catalog.process_per_run()
    return catalog if args.no_generated else with_generated(catalog, args.root)


def chosen_rank_mode(args: argparse.Namespace, catalog: Catalog) -> RankMode:
    """--rank-mode, or by the GPUs here (Catalog.auto_rank_mode)."""
    if args.rank_mode != "auto":
        return RankMode(args.rank_mode)
    return catalog.auto_rank_mode(gpu_count())


def workdir(args: argparse.Namespace, command: str) -> KeptFolder:
    """--workdir as given, else a temporary folder kept by hostio's one rule."""
    return KeptFolder(
        args.workdir,
        f"faults-{command}-",
        "scratch trees and logs",
        keep=args.keep,
        bad_input=(FaultsError,),
    )


def fitting_configs(catalog: Catalog, names: list[str] | None) -> list[str]:
    """The chosen configs (all by default) that fit this machine's GPUs; the
    others are said. None fitting is an error naming what each needs."""
    from faults.sweep.selection import select_configs

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


def program() -> str:
    """The name the user typed: the console script's, else `python -m faults`."""
    name = Path(sys.argv[0]).name
    return "python -m faults" if name in ("__main__.py", "-c", "") else name


def read_sweep(
    path: Path, named: str = "replay: --from", needed=REQUIRED, reader: str = ""
) -> SweepReport:
    """A sweep's report, or a UsageError naming the file (after `named`) and
    why (needed, reader: as faults.report.document.read_report)."""
    try:
        return read_report(path, needed, reader)
    except ReportError as error:
        raise UsageError(f"{named} {path}: {error}") from None


# The help of --slots and --no-exposure, which review and corpus share.
SLOTS_HELP = (
    "with --run: controls and must-pass faults this many at a time (must-fail: one); "
    "default: as measured on this machine (docs/results/engine-cost-<machine>-logical.json)"
)
# Where scripts/gpu/run_cost.py files what it measured on a machine, under the root.
ENGINE_COST = Path("docs/results")


def chosen_slots(args: argparse.Namespace) -> int:
    """--slots as given, else the runs at once measured on this kind of machine
    (the engine-cost document's `slots_default`: the fewest slots within 5 % of
    the most runs a second), said on stderr in one line; 1 where nothing was
    measured (said too)."""
    if args.slots is not None:
        return args.slots
    from hostio import CPU_MACHINE, machine_name, results_stem

    machine = machine_name()
    if machine == CPU_MACHINE:
        return 1  # nothing runs here
    stem = results_stem("engine-cost", machine, RankMode.LOGICAL)
    path = args.root / ENGINE_COST / f"{stem}.json"
    try:
        doc = json.loads(path.read_text())
        slots, basis = int(doc["slots_default"]), str(doc["slots_basis"])
    except (OSError, ValueError, KeyError, TypeError):
        print(
            f"slots: 1 (no engine-cost measurement of {machine} at {path}: "
            "scripts/gpu/run_cost.py makes one; --slots N chooses)",
            file=sys.stderr,
        )
        return 1
    print(f"slots: {slots}, measured on {machine}: {basis} ({path.name})", file=sys.stderr)
    return slots
NO_EXPOSURE_HELP = "with --run: leave out the configs' real-size twins"
