"""What a sweep takes on before any tree is built: the faults `--only`
chooses, the configs `--config` names, a history that opens, an output that
lies outside the target's sources, and the sites the catalog's own faults
cover; each refusal a SweepError naming the argument."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from faults.catalog import Catalog, Config
from faults.catalog.errors import FaultsError
from faults.catalog.model import FAULTS_LISTED
from faults.generate.site_faults import is_generated
from faults.report.document import SweepReport, catalog_sha256
from faults.sweep.history import History
from hostio import (
    known_names,
)


class SweepError(FaultsError):
    """A sweep that cannot start as asked; the message names the argument."""


def select_faults(catalog: Catalog, only: list[str] | None) -> list[str]:
    """The fault ids `only` names (each pattern matches whole ids), in catalog order."""
    if not only:
        return list(catalog.faults)
    chosen = set()
    for pattern in only:
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise SweepError(f"--only {pattern!r}: not a regular expression ({error})") from None
        matched = {f for f in catalog.faults if compiled.fullmatch(f)}
        if not matched:
            raise SweepError(
                f"--only {pattern!r} matches no fault id (a pattern matches whole ids); "
                f"{known_names(pattern, catalog.faults, FAULTS_LISTED)}"
            )
        chosen |= matched
    return [f for f in catalog.faults if f in chosen]


def left_unrun(report: SweepReport, catalog: Path, named: str) -> list[str]:
    """The faults an earlier shard's budget left (its `unrun`), as --only
    patterns; refused (`named`: the argument that gave the report) for a
    sweep of another catalog than `catalog`, or one that left nothing."""
    ours, theirs = catalog_sha256(catalog), report.catalog_sha256
    if theirs != ours:
        raise SweepError(
            f"{named}: a sweep of another catalog (sha256 {theirs[:12]}, {catalog} is "
            f"{ours[:12]})"
        )
    if not report.unrun:
        raise SweepError(f"{named}: its budget left no fault unrun")
    return [re.escape(fault) for fault in report.unrun]


def select_configs(catalog: Catalog, names: list[str] | None) -> list[Config]:
    known = [c.name for c in catalog.configs]
    for name in names or []:
        if name not in known:
            raise SweepError(f"--config {name!r}: no such config; known: {', '.join(known)}")
    return [c for c in catalog.configs if names is None or c.name in names]


def check_history(path: Path) -> None:
    """The history opens as SQLite now, not after the whole sweep."""
    try:
        History(path).close()
    except sqlite3.Error as error:
        raise SweepError(f"--history {path}: not a sweep history ({error})") from None


def covered_by_catalog(catalog: Catalog) -> set[str]:
    """Sites some hand-written fault patches."""
    return {
        p.site
        for f in catalog.faults.values()
        if not is_generated(f.id)
        for p in f.patches
        if p.site
    }
