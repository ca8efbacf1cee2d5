"""The shrink loop's runs through the engine (docs/operators.md,
"Shrinking"): the fault's tree applied and built once, each probe its
config's run command with the probe's arguments appended (the target's
parser takes the last value of an option). A generated regression test
calls `run_shrunk` for its one run."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

from faults.catalog import Catalog, CatalogError, Config, load_catalog
from faults.generate.site_faults import with_generated
from faults.judge.run_result import RunResult
from faults.pipeline.engine import Engine
from faults.shrink.loop import Runner, ShrinkError
from hostio import RankMode


def shrink_catalog(catalog: Catalog) -> Catalog:
    """The catalog with its exposure twins, so `<config>@<name>` can be shrunk."""
    return catalog.with_exposure()


def probe_config(config: Config, args: list[str], label: str) -> Config:
    """`config` with `args` after its own; `label` names the probe's log."""
    return replace(config, name=f"{config.name}.{label}", args=config.args + tuple(args))


def chosen_config(catalog: Catalog, fault_id: str, name: str | None) -> Config:
    """--config (a twin's name too), else the fault's first config; a config
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


def engine_runner(engine: Engine, fault_id: str, config: Config) -> Runner:
    """Each call one run of the fault's (once built) tree at the given args."""
    count = itertools.count(1)

    def run(args: list[str]) -> RunResult:
        [result] = engine.evaluate(fault_id, [probe_config(config, args, f"p{next(count)}")], 1)
        return result

    return run


def run_shrunk(
    root: Path,
    catalog_path: Path,
    fault_id: str,
    config_name: str,
    rank_mode: str,
    args: list[str],
    workdir: Path,
) -> RunResult:
    """One run of `fault_id` under `config_name` with `args` appended, as the
    shrink ran it: for a regression test."""
    catalog = load_catalog(catalog_path, tree_root=root).in_rank_mode(RankMode(rank_mode))
    catalog = shrink_catalog(with_generated(catalog, root))
    try:
        config = catalog.config(config_name)
    except CatalogError as error:
        raise ShrinkError(str(error)) from None
    return engine_runner(Engine(catalog, root, workdir), fault_id, config)(list(args))
