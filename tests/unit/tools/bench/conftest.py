"""What the micro-bench tests share: torch made to see one GPU that CUDA names
as told, so a bench's head, rows and report can be made on the CPU."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tools.bench import timing
from tools.driver.logical import CONNECTIONS

NODE_FLOOR_US = 2.5  # what the faked graph node floor measures


@pytest.fixture
def one_gpu_named(monkeypatch) -> Callable[[str], None]:
    """`one_gpu_named(name)`: torch sees one GPU CUDA names `name`; the graph
    node floor, the first GPU work a bench does, reads NODE_FLOOR_US."""

    def named(name: str) -> None:
        for variable in CONNECTIONS:
            monkeypatch.setenv(variable, "kept")  # start sets them; restored after the test
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
        monkeypatch.setattr(timing, "node_floor_us", lambda args: NODE_FLOOR_US)

    return named
