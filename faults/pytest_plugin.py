"""The pytest plugin (entry point `pytest11`): the `faults` marker, the
`--faults-*` options, and each xdist worker's own GPU group."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The catalogs a session parametrizes when --faults-catalog names none.
KNOWN_CATALOGS = ["tests/fixtures/flag_payload/catalog.toml", "catalogs/afdep.toml"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("afdep-faults", "afdep fault catalogs")
    group.addoption(
        "--faults-catalog",
        action="append",
        default=None,
        help="catalog to parametrize over (repeatable; default: every known catalog)",
    )
    group.addoption(
        "--faults-repeat",
        type=int,
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
    if not config.pluginmanager.has_plugin(RUN_LINES):
        config.pluginmanager.register(RunLines(config), RUN_LINES)


def selected_catalogs(config: pytest.Config, root: Path) -> list[Path]:
    """--faults-catalog's paths, else the known catalogs present under `root`."""
    chosen = config.getoption("--faults-catalog", None)
    if chosen:
        return [Path(p) for p in chosen]
    return [root / p for p in KNOWN_CATALOGS if (root / p).exists()]


SESSION_LINES = pytest.StashKey[list[str]]()


def session_lines(config: pytest.Config) -> list[str]:
    """Which sources and catalogs this session judges, so a saved log says so
    (worked out once: the header and the closing summary both print it)."""
    if SESSION_LINES not in config.stash:
        config.stash[SESSION_LINES] = _session_lines(config)
    return config.stash[SESSION_LINES]


def _session_lines(config: pytest.Config) -> list[str]:
    from faults.catalog import CatalogError, load_catalog
    from faults.report import catalog_sha256
    from faults.scratch import tree_digest
    from hostio import gpu_count

    root = Path(config.rootpath)
    lines = []
    for path in selected_catalogs(config, root):
        try:
            catalog = load_catalog(path, tree_root=root)
        except (CatalogError, OSError) as error:  # collection reports it in full
            lines.append(f"faults: {path}: {error}")
            continue
        sources = root / catalog.target.sources
        lines.append(
            f"faults: {catalog.target.name} sources {catalog.target.sources} "
            f"sha256 {tree_digest(sources)}, catalog sha256 {catalog_sha256(path)[:12]}, "
            f"{gpu_count()} GPUs here"
        )
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    return session_lines(config)


# The user property under which a catalog case records each run's seed-style line.
RESULT_PROPERTY = "faults_result"
RUN_LINES = "afdep-faults-run-lines"


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


def gpu_group(worker: str | None, size: int, visible: str | None, count: int) -> list[str]:
    """The devices xdist worker `gwN` owns: the N-th run of `size` devices of
    those visible (an outer CUDA_VISIBLE_DEVICES, else 0..count-1). No worker
    id (no xdist) means the first group."""
    devices = [d for d in visible.split(",") if d] if visible else [str(i) for i in range(count)]
    index = int(worker[2:]) if worker and worker.startswith("gw") else 0
    group = devices[index * size : (index + 1) * size]
    if len(group) < size:
        raise LookupError(
            f"worker {worker or 'gw0'} needs devices {index * size}.."
            f"{(index + 1) * size - 1} of {devices}: run fewer workers"
        )
    return group


def worker_gpu_env(size: int) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES for this worker's runs (empty when it needs none)."""
    if size == 0:
        return {}
    import torch

    group = gpu_group(
        os.environ.get("PYTEST_XDIST_WORKER"),
        size,
        os.environ.get("CUDA_VISIBLE_DEVICES"),
        torch.cuda.device_count(),
    )
    return {"CUDA_VISIBLE_DEVICES": ",".join(group)}
