"""Regression: the fault
gen.epoch-off-by-one.cb.attention_combine.row_wait
stays KILLED at the input `shrink` found under bf16-graph
(logical ranks, on 1xH200)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.judge.verdict import Verdict
from faults.shrink.runs import run_shrunk
from hostio import gpu_count

ROOT = Path(__file__).resolve().parents[2]
CATALOG = "catalogs/afdep.toml"
FAULT = "gen.epoch-off-by-one.cb.attention_combine.row_wait"
CONFIG = "bf16-graph"
RANK_MODE = "logical"
GPUS = 1
ARGS = [
    "--tokens",
    "1",
    "--steps",
    "1",
    "--top-k",
    "2",
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
def test_gen_epoch_off_by_one_cb_attention_combine_row_wait_killed_when_shrunk(tmp_path):
    result = run_shrunk(ROOT, ROOT / CATALOG, FAULT, CONFIG, RANK_MODE, ARGS, tmp_path)
    assert result.verdict is Verdict.KILLED, result.reason
