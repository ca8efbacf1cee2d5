"""ffn_combine on one GPU in the logical mode (`pytest -m gpu`): the combined
output matches the reference bitwise at two sizes, on 24 CTAs and on every SM,
through the micro-bench (`python -m tools.bench.combine`)."""

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


def test_the_combine_is_bitwise_the_reference_at_two_sizes(tmp_path):
    command = [sys.executable, "-m", "tools.bench.combine", "--tokens", "128", "2048"]
    command += ["--iters", "3", "--warmup", "1", "--reps", "2", "--results-dir", str(tmp_path)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    outcome = run_logged(command, tmp_path / "bench.log", timeout_s=300, env=env)
    log = (tmp_path / "bench.log").read_text(errors="replace")
    assert outcome.exit_code == 0, log[-2000:]
    document = json.loads((tmp_path / f"combine-{machine_name()}.json").read_text())
    assert document["trees"] == {str(CSRC): source_digest(CSRC)}
    rows = [(r["tokens"], r["bitwise"], r["mismatch"]) for r in document["rows"]]
    assert rows == [(t, True, None) for t in (128, 128, 2048, 2048)]
    assert sorted({r["ctas"] for r in document["rows"]})[0] == 24
