"""Parametrize the catalog cases: catalog x fault x config."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.pytest_plugin import selected_catalogs
from hostio import gpu_count

REPO = Path(__file__).parents[2]


def catalog_paths(config: pytest.Config) -> list[Path]:
    return selected_catalogs(config, REPO)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "catalog_case" not in metafunc.fixturenames:
        return
    cases = []
    for path in catalog_paths(metafunc.config):
        catalog = load_catalog(path, tree_root=REPO)
        for fault_id in catalog.faults:
            for config in catalog.configs_for(fault_id):
                cases.append(
                    pytest.param(
                        (path, fault_id, config.name),
                        id=f"{catalog.target.name}-{fault_id}-{config.name}",
                    )
                )
    metafunc.parametrize("catalog_case", cases)


@pytest.fixture(scope="session")
def engines(tmp_path_factory, pytestconfig):
    """One engine per catalog for the session (scratch trees under one workdir)."""
    from faults.engine import Engine
    from faults.pytest_plugin import worker_gpu_env

    root = pytestconfig.getoption("--faults-workdir", None)
    workdir = Path(root) if root else tmp_path_factory.mktemp("faults")
    made: dict[Path, Engine] = {}

    def engine_for(path: Path) -> Engine:
        if path not in made:
            catalog = load_catalog(path, tree_root=REPO)
            # This worker's GPU group holds the largest config that fits here.
            fitting = [
                catalog.gpus_for(c) for c in catalog.configs if enough_gpus(catalog.gpus_for(c))
            ]
            group = max(fitting, default=0)
            env = worker_gpu_env(group) if group else {}
            made[path] = Engine(catalog, REPO, workdir / catalog.target.name, env=env)
        return made[path]

    return engine_for


def enough_gpus(needed: int) -> bool:
    return needed == 0 or gpu_count() >= needed
