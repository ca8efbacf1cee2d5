"""What a shrink starts from (docs/operators.md, "Shrinking"), every bad
argument said in one line before any tree is copied: the catalog with its
real-size configs, a must-fail fault, the config it runs under, the run
command and the start input."""

from __future__ import annotations

from dataclasses import dataclass

from faults.catalog import Catalog, Config
from faults.shrink.loop import ShrinkError, start_input
from faults.shrink.table import Number


@dataclass(frozen=True)
class ShrinkPlan:
    catalog: Catalog  # with its real-size configs and a [shrink] table
    fault: str
    config: Config
    words: list[str]  # the run command with the config's args, for the relations
    start: dict[str, Number]


def shrink_catalog(catalog: Catalog) -> Catalog:
    """The catalog with its real-size configs, so `<config>@<name>` can be shrunk."""
    return catalog.with_exposure()


def chosen_config(catalog: Catalog, fault_id: str, name: str | None) -> Config:
    """--config (a real-size config's name too), else the fault's first config; a config
    the fault does not run under is an error naming both."""
    fault = catalog.fault(fault_id)
    if fault.expect != "fail":
        raise ShrinkError(
            f"shrink: fault {fault_id} is must-pass: only a must-fail fault that kills can shrink"
        )
    runs_under = catalog.configs_for(fault_id)
    if name is None:
        if not runs_under:
            raise ShrinkError(f"shrink: fault {fault_id} runs under no config of the catalog")
        return runs_under[0]
    config = catalog.config(name)  # an unknown name is a CatalogError naming the known ones
    if config not in runs_under:
        raise ShrinkError(
            f"shrink: fault {fault_id} does not run under config {name}; it runs under "
            f"{[c.name for c in runs_under]}"
        )
    return config


def plan_shrink(catalog: Catalog, fault_id: str, config_name: str | None) -> ShrinkPlan:
    """The shrink of `fault_id` under `config_name` (None: its first config)
    by the catalog's [shrink] table; a ShrinkError (or CatalogError) naming
    what is wrong."""
    catalog = shrink_catalog(catalog)
    if catalog.shrink is None:
        raise ShrinkError(f"shrink: {catalog.path}: no [shrink] table to shrink by")
    config = chosen_config(catalog, fault_id, config_name)
    words = list(catalog.target.run + config.args)
    return ShrinkPlan(catalog, fault_id, config, words, start_input(catalog.shrink, words))
