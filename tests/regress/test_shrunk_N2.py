"""Regression: the fault
N2
stays KILLED at the input `shrink` found under bf16-graph@2048
(logical ranks, on 1xH200)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.judge.verdict import Verdict
from faults.shrink.runs import run_shrunk
from hostio import gpu_count

ROOT = Path(__file__).resolve().parents[2]
CATALOG = "catalogs/afdep.toml"
FAULT = "N2"
CONFIG = "bf16-graph@2048"
RANK_MODE = "logical"
GPUS = 1
ARGS = [
    "--tokens",
    "16",
    "--steps",
    "4",
    "--top-k",
    "8",
    "--num-experts",
    "128",
    "--hidden-size",
    "2048",
    "--capacity",
    "2048",
    "--empty-prob",
    "0.1",
]


@pytest.mark.gpu(GPUS)
@pytest.mark.skipif(gpu_count() < GPUS, reason=f"needs {GPUS} GPUs (found {gpu_count()})")
def test_N2_killed_when_shrunk(tmp_path):
    result = run_shrunk(ROOT, ROOT / CATALOG, FAULT, CONFIG, RANK_MODE, ARGS, tmp_path)
    assert result.verdict is Verdict.KILLED, result.reason
