"""Catalogs: a target (how to build and run a tree), its configurations, a
forced-fail control and the faults, loaded from TOML and checked on load
(load.py), every error naming the file, the fault and the field at fault.
The model is model.py; each table is checked by its own module (target,
log, contract, knobs, identity, mutation, publisher, configs, exposure, generate, faults,
refs), a concept's own table by its package (faults/schedules/table.py,
faults/shrink/table.py). Callers import the model's names from here."""

from __future__ import annotations

from faults.catalog.errors import CatalogError
from faults.catalog.load import load_catalog
from faults.catalog.model import (
    LOG_KEYS,
    Catalog,
    Config,
    Fault,
    GenerateSettings,
    LogPatterns,
    Patch,
    Target,
)
from faults.catalog.refs import check_sites_exist

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
