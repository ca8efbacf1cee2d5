"""The fault engine's pytest plugin, all of it (entry point `pytest11`, or
`-p faults.pytest_plugin`): the `--faults-*` options and the `faults` marker,
the parametrization of a `catalog_case` fixture over catalog x fault x config,
the session's `engines` with each xdist worker's own GPU group, the session
header and the `fault runs` section (docs/catalog.md, "Pipeline of the fault engine").

A test module only asks for the fixtures:

    def test_fault(catalog_case, engines):
        engine = engines(catalog_case.path)
        ...
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import pytest

from faults.catalog.project import NoCatalogsTable, ProjectError, project_catalogs
from hostio import at_least_one

# The user property under which a catalog case records each run's summary line.
RESULT_PROPERTY = "faults_result"
RUN_LINES = "faults-run-lines"


# ---------------------------------------------------------------- options, marker
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("faults", "fault catalogs (faults.pytest_plugin)")
    group.addoption(
        "--faults-catalog",
        action="append",
        default=None,
        help="catalog to parametrize over (repeatable; default: [tool.faults] catalogs)",
    )
    group.addoption(
        "--faults-repeat",
        type=at_least_one,  # 0 would judge no run and pass
        default=1,
        help="runs per (fault, config); a must-fail fault must be killed in each",
    )
    group.addoption(
        "--faults-workdir",
        default=None,
        help="keep scratch trees and logs here (default: pytest's tmp dir)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "faults: a fault-catalog case (apply + build always; run and verdict when "
        "the hardware its target needs is present)",
    )


WORKER_ID = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter prints the header
def pytest_sessionstart(session: pytest.Session) -> None:
    # The controller (or a session without xdist) prints the header and the run
    # lines; the workers send it their reports and need not digest the sources.
    worker = session.config.stash[WORKER_ID] = xdist_worker_id(session)
    plugins = session.config.pluginmanager
    if worker == "master" and not plugins.has_plugin(RUN_LINES):
        plugins.register(RunLines(session.config), RUN_LINES)


def selected_catalogs(config: pytest.Config) -> list[Path]:
    """--faults-catalog's paths, else the project's catalogs that exist
    (raises ProjectError when pyproject.toml does not list them)."""
    chosen = config.getoption("--faults-catalog", None)
    if chosen:
        return [Path(p) for p in chosen]
    return [path for path in project_catalogs(config.rootpath) if path.exists()]


# ---------------------------------------------------------------- parametrization
class CatalogCase(NamedTuple):
    path: Path
    fault_id: str
    config_name: str


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "catalog_case" not in metafunc.fixturenames:
        return
    from faults.catalog import CatalogError, load_catalog

    cases = []
    try:
        for path in selected_catalogs(metafunc.config):
            catalog = load_catalog(path, tree_root=metafunc.config.rootpath)
            for fault_id in catalog.faults:
                for config in catalog.configs_for(fault_id):
                    cases.append(
                        pytest.param(
                            CatalogCase(path, fault_id, config.name),
                            id=f"{catalog.target.name}-{fault_id}-{config.name}",
                        )
                    )
    except (ProjectError, CatalogError, OSError) as error:
        # A collection error of one line, naming the file, not a traceback.
        raise pytest.Collector.CollectError(str(error)) from None
    metafunc.parametrize("catalog_case", cases)


# ---------------------------------------------------------------- engines, GPUs
@pytest.fixture(scope="session")
def engines(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """`engines(path)`: one engine per catalog for the session, its scratch
    trees under one workdir, its runs on this xdist worker's GPU group."""
    from faults.catalog import load_catalog
    from faults.pipeline.engine import Engine
    from hostio import gpu_count

    config = request.config
    root = config.rootpath
    chosen = config.getoption("--faults-workdir", None)
    workdir = Path(chosen) if chosen else tmp_path_factory.mktemp("faults")
    made: dict[Path, Engine] = {}

    def engine_for(path: Path) -> Engine:
        if path not in made:
            catalog = load_catalog(path, tree_root=root)
            catalog = catalog.in_rank_mode(catalog.auto_rank_mode(gpu_count()))
            # The group holds the largest config that fits here.
            fitting = [catalog.gpus_for(c) for c in catalog.configs]
            size = max((n for n in fitting if enough_gpus(n)), default=0)
            env = worker_gpu_env(request, size)
            # Every xdist worker runs at once: each run gets its share of the CPU.
            workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
            # Where no config can run, a case applies and builds only: whether the
            # compiler erased a fault (it decides whether to run it) decides nothing.
            runs_here = any(enough_gpus(n) for n in fitting)
            made[path] = Engine(
                catalog, root, workdir / catalog.target.name, env=env, runs_at_once=workers,
                erasure=runs_here,
            )  # fmt: skip
        return made[path]

    return engine_for


def enough_gpus(needed: int) -> bool:
    from hostio import gpu_count

    return needed == 0 or gpu_count() >= needed


def xdist_worker_id(request_or_session: pytest.FixtureRequest | pytest.Session) -> str:
    """xdist's id of this worker (`gw0`, `gw1`, ...), or `master` without
    xdist or outside a worker (xdist is optional)."""
    try:
        from xdist import get_xdist_worker_id
    except ImportError:
        return "master"
    return get_xdist_worker_id(request_or_session)


def worker_index(worker_id: str) -> int:
    """`gwN` -> N; `master` (no workers) -> 0."""
    return int(worker_id[2:]) if worker_id.startswith("gw") else 0


def worker_gpu_env(request: pytest.FixtureRequest, size: int) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for this worker's runs (empty when they need none)."""
    if size == 0:
        return {}
    from hostio import gpu_count, gpu_group

    index = worker_index(xdist_worker_id(request))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    group = gpu_group(index, size, visible, 0 if visible else gpu_count())
    return {"CUDA_VISIBLE_DEVICES": ",".join(group)}


# ---------------------------------------------------------------- header, run lines
SESSION_LINES = pytest.StashKey[list[str]]()


def session_lines(config: pytest.Config) -> list[str]:
    """Which sources and catalogs this session judges, so a saved log says so
    (worked out once: the header and the closing summary both print it)."""
    if SESSION_LINES not in config.stash:
        config.stash[SESSION_LINES] = _session_lines(config)
    return config.stash[SESSION_LINES]


def _session_lines(config: pytest.Config) -> list[str]:
    from faults.catalog import CatalogError, load_catalog
    from faults.pipeline.scratch import tree_digest
    from faults.report.document import catalog_sha256
    from hostio import gpu_count

    root = config.rootpath
    try:
        paths = selected_catalogs(config)
    except NoCatalogsTable:  # a project without catalogs: nothing to say
        return []
    except ProjectError as error:
        return [f"faults: {error}"]
    lines = []
    for path in paths:
        try:
            catalog = load_catalog(path, tree_root=root)
        except (CatalogError, OSError) as error:  # collection reports it too
            lines.append(f"faults: {path}: {error}")
            continue
        sources = root / catalog.target.sources
        lines.append(
            f"faults: {catalog.target.name} sources {catalog.target.sources} "
            f"sha256 {tree_digest(sources)}, catalog sha256 {catalog_sha256(path)[:12]}, "
            f"{gpu_count()} GPUs here, rank mode {catalog.auto_rank_mode(gpu_count())}"
        )
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    return session_lines(config) if config.stash.get(WORKER_ID, "master") == "master" else []


class RunLines:
    """Collects the runs' summary lines from the test reports (which xdist
    workers send to the controller) for the terminal summary: `-q` hides the
    session header, and a saved log must still say what it judged."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.lines: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.lines += [v for k, v in report.user_properties if k == RESULT_PROPERTY]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.lines:
            return
        terminalreporter.write_sep("=", "fault runs")
        for line in [*session_lines(self.config), *sorted(self.lines)]:
            terminalreporter.write_line(line)
