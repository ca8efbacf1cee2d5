"""The shrink loop's runs through the engine (docs/operators.md,
"Shrinking"): the fault's tree applied and built once, each probe its
config's run command with the probe's arguments appended (the target's
parser takes the last value of an option), and the loop over them. A
generated regression test calls `run_shrunk` for its one run."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from faults.catalog import CatalogError, Config, load_catalog
from faults.generate.site_faults import with_generated
from faults.judge.run_result import RunResult
from faults.pipeline.engine import Engine
from faults.shrink.loop import Runner, ShrinkError, ShrinkLoop, Shrunk, start_alternatives
from faults.shrink.plan import ShrinkPlan, shrink_catalog
from hostio import RankMode


def probe_config(config: Config, args: list[str], label: str) -> Config:
    """`config` with `args` after its own; `label` names the probe's log."""
    return replace(config, name=f"{config.name}.{label}", args=config.args + tuple(args))


def engine_runner(engine: Engine, fault_id: str, config: Config) -> Runner:
    """Each call one run of the fault's (once built) tree at the given args."""
    count = itertools.count(1)

    def run(args: list[str]) -> RunResult:
        [result] = engine.evaluate(fault_id, [probe_config(config, args, f"p{next(count)}")], 1)
        return result

    return run


def built_tree(engine: Engine, fault_id: str) -> str:
    """The fault's tree applied and built once (every probe runs it), its
    digest; a ShrinkError naming why when it cannot be (not applied, not
    built, erased)."""
    prepared = engine.prepare(fault_id, fault_id)
    if prepared.error:
        first = prepared.error.reason.splitlines()[0]
        raise ShrinkError(f"shrink: {fault_id}: {prepared.error.verdict}: {first}")
    return prepared.digest


def shrink_on(
    engine: Engine,
    plan: ShrinkPlan,
    budget_s: float,
    repeat: int,
    on_probe: Callable[[Shrunk], None],
) -> Shrunk:
    """The loop from the plan's start input (then the other starts its run
    command's lists give), each probe `repeat` runs of the fault's built tree
    on `engine`; `on_probe` told after each (a report as it goes: a killed
    shrink still has one)."""
    spec, runner = plan.catalog.shrink, engine_runner(engine, plan.fault, plan.config)
    loop = ShrinkLoop(spec, plan.words, runner, budget_s, repeat, on_probe=on_probe)
    return loop.run(plan.start, start_alternatives(spec, plan.words, plan.start))


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
