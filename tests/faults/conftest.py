"""Parametrize the catalog cases: catalog x fault x config."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.run import gpu_count

REPO = Path(__file__).parents[2]
KNOWN_CATALOGS = ["tests/fixtures/flag_payload/catalog.toml", "faults/catalogs/afdep.toml"]


def catalog_paths(config: pytest.Config) -> list[Path]:
    chosen = config.getoption("--faults-catalog", None)  # None: plugin not loaded
    if chosen:
        return [Path(p) for p in chosen]
    return [REPO / p for p in KNOWN_CATALOGS if (REPO / p).exists()]


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which sources and catalogs this session judges, so a saved log says so."""
    from faults.report import catalog_sha256
    from faults.scratch import tree_digest

    lines = []
    for path in catalog_paths(config):
        catalog = load_catalog(path, tree_root=REPO)
        sources = REPO / catalog.target.sources
        lines.append(
            f"faults: {catalog.target.name} sources {catalog.target.sources} "
            f"sha256 {tree_digest(sources)}, catalog sha256 {catalog_sha256(path)[:12]}, "
            f"{gpu_count()} GPUs here"
        )
    return lines


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
