"""The pytest plugin (entry point `pytest11`): the `faults` marker, the
`--faults-*` options, and each xdist worker's own GPU group."""

from __future__ import annotations

import os

import pytest


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
