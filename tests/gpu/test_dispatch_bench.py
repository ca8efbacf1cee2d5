"""attention_dispatch on one GPU in the logical mode (`pytest -m gpu`): the FFN
rank's dispatch output matches the reference bitwise at a token, a partial
word and a full capacity, through the micro-bench (`python -m
tools.bench.dispatch`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from afdep.jit import CSRC, source_digest
from hostio import machine_name, run_logged

pytestmark = pytest.mark.gpu(1)

REPO = Path(__file__).parents[2]


def test_the_dispatch_is_bitwise_the_reference_at_three_sizes(tmp_path):
    command = [sys.executable, "-m", "tools.bench.dispatch", "--tokens", "1", "77", "1000"]
    command += ["--capacity", "1000", "--iters", "3", "--warmup", "1", "--reps", "2"]
    command += ["--results-dir", str(tmp_path)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    outcome = run_logged(command, tmp_path / "bench.log", timeout_s=300, env=env)
    log = (tmp_path / "bench.log").read_text(errors="replace")
    assert outcome.exit_code == 0, log[-2000:]
    document = json.loads((tmp_path / f"dispatch-{machine_name()}.json").read_text())
    assert document["trees"] == {str(CSRC): source_digest(CSRC)}
    rows = [(r["tokens"], r["capacity"], r["bitwise"], r["mismatch"]) for r in document["rows"]]
    assert rows == [(t, 1000, True, None) for t in (1, 77, 1000)]
    # the floors: a kernel that does nothing, and the launch without attention_dispatch
    assert document["node_floor_us"] > 0
    assert all(0 < row["floor_us"] < row["us"] for row in document["rows"]), document["rows"]
