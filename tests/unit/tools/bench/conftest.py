"""What the micro-bench tests share: one GPU seen (hostio's count) that CUDA
names as told, so a bench's head, rows and report can be made on the CPU."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import hostio
from tools.bench import timing
from tools.driver.logical import CONNECTIONS

NODE_FLOOR_US = 2.5  # what the faked graph node floor measures


@pytest.fixture
def gpus_seen(monkeypatch) -> Callable[[int], None]:
    """`gpus_seen(count)`: hostio counts `count` GPUs, where machine_name asks
    and where a bench imports the count at its call."""

    def seen(count: int) -> None:
        monkeypatch.setattr(hostio.machine, "gpu_count", lambda: count)
        monkeypatch.setattr(hostio, "gpu_count", lambda: count)

    return seen


@pytest.fixture
def one_gpu_named(monkeypatch, gpus_seen) -> Callable[[str], None]:
    """`one_gpu_named(name)`: hostio counts one GPU, CUDA names it `name`; the graph
    node floor, the first GPU work a bench does, reads NODE_FLOOR_US."""

    def named(name: str) -> None:
        for variable in CONNECTIONS:
            monkeypatch.setenv(variable, "kept")  # start sets them; restored after the test
        gpus_seen(1)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
        monkeypatch.setattr(timing, "node_floor_us", lambda args: NODE_FLOOR_US)

    return named
