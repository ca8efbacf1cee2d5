"""afdep validate in logical mode on one GPU (`pytest -m gpu`): a row of each
expectation (pass at 2 and 4 ranks, the timed row, route at 2 and 4 ranks,
timeout, agreement) meets it, judged by the logical rules, into
validate-<1xGPU>-logical.json (docs/synchronization.md, "One GPU, logical ranks")."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from afdep.jit import source_digest
from hostio import run_logged

pytestmark = pytest.mark.gpu(1)

REPO = Path(__file__).parents[2]
ROWS = (
    "bf16-graph-h2048-sms24",
    "1a3f-cf-fp8-graph",
    "invalid-eager-wide",
    "2a2f-invalid-graph-dummy",
    "skip-dispatch-ffn",
    "2a2f-disagree",
)


def test_one_row_of_each_expectation_meets_it_with_logical_ranks(tmp_path):
    import torch

    only = "^(" + "|".join(ROWS) + ")$"
    command = [sys.executable, "-m", "tools.validate", "--rank-mode", "logical", "--only", only]
    command += ["--results-dir", str(tmp_path / "results"), "--logs-dir", str(tmp_path / "logs")]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    outcome = run_logged(command, tmp_path / "validate.log", timeout_s=540, env=env)
    text = Path(outcome.log_path).read_text(errors="replace")
    assert outcome.exit_code == 0 and not outcome.outer_timeout, text[-4000:]
    gpu = torch.cuda.get_device_name(0).replace("NVIDIA ", "").split()[0]
    document = json.loads((tmp_path / "results" / f"validate-1x{gpu}-logical.json").read_text())
    assert (document["mode"], document["native_source_sha256"]) == ("logical", source_digest())
    assert document["rank_mode"] == f"1x{gpu}, 2 logical ranks; 1x{gpu}, 4 logical ranks"
    assert sorted(document["runs"]) == sorted(ROWS)
    assert [name for name, run in document["runs"].items() if not run["ok"]] == []
    assert document["runs"]["2a2f-disagree"]["agreement_ranks"] == [0, 1, 2, 3]
    assert document["runs"]["2a2f-invalid-graph-dummy"]["failed_ranks"] == [0, 1, 2, 3]
