"""A catalog read from TOML and checked table by table into its model
(faults/catalog/model.py): every error names the file, the fault and the
field at fault (docs/catalog.md, "Pipeline of the fault engine", item 1)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from faults.catalog.configs import config_tables
from faults.catalog.errors import CatalogError, read_toml
from faults.catalog.exposure import exposure_table
from faults.catalog.faults import control_table, fault_table
from faults.catalog.fields import fail, fail_in, tables
from faults.catalog.generate import generate_table
from faults.catalog.identity import check_identity
from faults.catalog.matrix import matrix_table
from faults.catalog.model import Catalog, Fault, Target
from faults.catalog.mutation import mutation_rules
from faults.catalog.refs import check_includes, check_sites_exist
from faults.catalog.target import target_table
from faults.shrink.table import shrink_table

NOT_TEXT = "not UTF-8 text (a TOML catalog is)"


def load_catalog(path: Path, *, tree_root: Path | None = None) -> Catalog:
    """Load and check a catalog. With `tree_root`, site names are checked
    against the sites of `<tree_root>/<target.sources>`."""
    path = Path(path)
    catalog = catalog_from_tables(path, read_toml(path, lambda error: _unreadable(path, error)))
    if tree_root is not None:
        check_sites_exist(catalog, Path(tree_root) / catalog.target.sources)
        check_identity(path, catalog.target.identity, Path(tree_root) / catalog.target.sources)
    return catalog


def load_target(path: Path) -> Target:
    """The catalog's [target] table alone, checked: what a command's doors
    need before any work (its sources, its knobs), without the tree's sites."""
    path = Path(path)
    data = read_toml(path, lambda error: _unreadable(path, error))
    return target_table(path, data.get("target"))


def _unreadable(path: Path, error: Exception) -> CatalogError:
    why = NOT_TEXT if isinstance(error, UnicodeDecodeError) else error
    return CatalogError(f"{path}: cannot read: {why}")


def catalog_from_tables(path: Path, data: dict) -> Catalog:
    """The catalog the TOML tables of `path` describe, every table checked."""
    known = {"target", "config", "fault", "control", "generate", "exposure", "shrink", "matrix"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise fail(path, "top level", f"unknown tables {unknown}")
    target = target_table(path, data.get("target"))
    target = replace(target, mutations=mutation_rules(path, data["target"].get("mutation", [])))
    configs = config_tables(path, data.get("config", []))
    faults: dict[str, Fault] = {}
    for index, raw in enumerate(tables(path, "top level", "fault", data.get("fault", []))):
        fault = fault_table(path, index, raw, target)
        if fault.id in faults:
            raise fail(path, f"fault {fault.id}", "id: duplicate fault id")
        faults[fault.id] = fault
    if not faults:  # a sweep of nothing would pass
        raise fail(path, "top level", "no [[fault]]: a catalog needs at least one fault")
    control = control_table(path, data.get("control", {}), target)
    generate = generate_table(path, data, configs, target)
    exposure = exposure_table(path, data.get("exposure"))
    shrink = shrink_table(data.get("shrink"), fail_in(path))
    matrix = matrix_table(path, data.get("matrix"))
    catalog = Catalog(
        path, target, configs, faults, control, generate,
        exposure=exposure, shrink=shrink, matrix=matrix,
    )  # fmt: skip
    check_includes(catalog)
    return catalog
