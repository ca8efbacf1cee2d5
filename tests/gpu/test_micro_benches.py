"""The one-GPU micro-benches on a GPU (`pytest -m gpu`): each runs one small
size end to end with this tree and its rows come back bitwise right, with the
grids it was asked for (docs/tools.md, "Performance targets")."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from afdep.jit import source_digest
from hostio import run_logged
from tools.bench.micro import NUM_SMS

pytestmark = pytest.mark.gpu(1)

REPO = Path(__file__).parents[2]
SMALL = ["--tokens", "256", "--iters", "3", "--warmup", "1", "--reps", "2"]


def bench(name: str, tmp_path: Path, *extra: str) -> dict:
    """`python -m tools.bench.<name>` at one small size; its JSON report."""
    command = [sys.executable, "-m", f"tools.bench.{name}", *SMALL, *extra]
    command += ["--results-dir", str(tmp_path)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    outcome = run_logged(command, tmp_path / f"{name}.log", timeout_s=300, env=env)
    text = Path(outcome.log_path).read_text(errors="replace")
    assert outcome.exit_code == 0 and not outcome.outer_timeout, text[-4000:]
    [report] = tmp_path.glob(f"{name}-*.json")  # <name>-<machine>.json
    document = json.loads(report.read_text())
    assert list(document["trees"].values()) == [source_digest()]
    assert all(row["bitwise"] for row in document["rows"]), document["rows"]
    return document


def test_ffn_expand_runs_on_24_ctas_and_on_every_sm_its_ffn_rank_holds(tmp_path):
    import torch

    rows = bench("expand", tmp_path)["rows"]
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    # 1A:1F logical: the attention rank's 24 CTAs aside, the FFN rank's expansion takes the rest
    assert [row["ctas"] for row in rows] == [NUM_SMS, sm_count - NUM_SMS]


def test_ffn_combine_and_attention_dispatch_run_bitwise_right(tmp_path):
    assert [row["ctas"] for row in bench("combine", tmp_path, "--ctas", "7")["rows"]] == [7]
    words = ["--capacity", "512", "--protocol", "payload-first", "--protocol", "count-first"]
    rows = bench("dispatch", tmp_path, *words)["rows"]
    assert [(row["tokens"], row["protocol"]) for row in rows] == [
        (256, "payload-first"),
        (256, "count-first"),
    ]
