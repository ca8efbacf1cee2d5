"""Catalogs: a target (how to build and run a tree), its configurations, a
forced-fail control and the faults, loaded from TOML and checked on load.
Every error names the file, the fault and the field at fault. The types are
in faults/catalog_types.py, the checks of each table in
faults/catalog_checks.py; callers import all of it from here."""

from __future__ import annotations

from pathlib import Path

import tomllib

from faults.catalog_checks import catalog_from_tables
from faults.catalog_refs import check_sites_exist
from faults.catalog_types import (
    LOG_KEYS,
    Catalog,
    CatalogError,
    Config,
    Fault,
    GenerateSettings,
    LogPatterns,
    Patch,
    Target,
)

__all__ = [
    "LOG_KEYS",
    "Catalog",
    "CatalogError",
    "Config",
    "Fault",
    "GenerateSettings",
    "LogPatterns",
    "Patch",
    "Target",
    "check_sites_exist",
    "load_catalog",
]


def load_catalog(path: Path, *, tree_root: Path | None = None) -> Catalog:
    """Load and check a catalog. With `tree_root`, site names are checked
    against the sites of `<tree_root>/<target.sources>`."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CatalogError(f"{path}: cannot read: {error}") from None
    catalog = catalog_from_tables(path, data)
    if tree_root is not None:
        check_sites_exist(catalog, Path(tree_root) / catalog.target.sources)
    return catalog
