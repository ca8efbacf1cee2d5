"""What every `afdep-faults` command shares: the catalog as the command sees
it (generated faults, rank mode), its working folder, the configs that fit
this machine, a sweep report read back, the name the user typed, and the
lines a long command says as it goes."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
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


def chosen_slots(args: argparse.Namespace) -> int:
    """--slots as given, else the runs at once measured on this kind of machine
    (the engine-cost document's `slots_default`: the fewest slots within 5 % of
    the most runs a second), said on stderr in one line; 1 where nothing was
    measured (said too)."""
    if args.slots is not None:
        return args.slots
    from hostio import CPU_MACHINE, RESULTS_DIR, machine_name, results_stem

    machine = machine_name()
    if machine == CPU_MACHINE:
        return 1  # nothing runs here
    stem = results_stem("engine-cost", machine, RankMode.LOGICAL)
    path = args.root / RESULTS_DIR / f"{stem}.json"  # where scripts/gpu/run_cost.py files it
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
NO_EXPOSURE_HELP = "with --run: leave out the configs' real-size configs"


class ProgressLines:
    """What a long command says as it goes (the sweep, review --run): each
    line led by the seconds since it began, how many of its `total` units
    are done and the time left at the pace so far. A log or CI, where no bar
    is drawn, has the count and the ETA in every line; a terminal also gets
    a bar under the lines (rich's, gone at the end). Lines come from several
    threads (runs land on each slot's)."""

    def __init__(self, what: str, total: int | None = None, *, stderr=False, clock=time.monotonic):
        self.what, self.total, self.stderr, self.clock = what, total, stderr, clock
        self.done = 0
        self._lock = threading.Lock()

    def __enter__(self) -> ProgressLines:
        from rich.console import Console
        from rich.progress import Progress

        self._bar = Progress(console=Console(stderr=self.stderr), transient=True)
        self._bar.__enter__()
        self._task = self._bar.add_task(self.what, total=self.total)
        self._began = self.clock()
        return self

    def __exit__(self, *raised) -> None:
        self._bar.__exit__(*raised)

    def count(self, done: int, total: int | None = None) -> None:
        """`done` of `total` units (a total that grows as work is planned)."""
        with self._lock:
            self.done = done
            self.total = self.total if total is None else total
            self._bar.update(self._task, completed=done, total=self.total)

    def advance(self) -> None:
        with self._lock:
            self.done += 1
            self._bar.update(self._task, completed=self.done)

    def say(self, line: str) -> None:
        with self._lock:
            said = f"{self._lead()}  {line}"
            self._bar.console.print(said, soft_wrap=True, markup=False, highlight=False)

    def _lead(self) -> str:
        """`  12.3 s  [3/17, ETA 1m05s]`: no ETA before the first unit is done."""
        spent = self.clock() - self._began
        if self.total is None:
            return f"{spent:6.1f} s  [{self.done}]"
        count = f"{self.done}/{self.total}"
        if 0 < self.done < self.total:
            count += f", ETA {duration(spent / self.done * (self.total - self.done))}"
        return f"{spent:6.1f} s  [{count}]"


def duration(seconds: float) -> str:
    """`42s`, `4m05s`, `1h02m`: a time left, as short as it can be read."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
