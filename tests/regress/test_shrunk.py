"""Regression: every fault `shrink --write-test` shrank stays KILLED at the
input it found. One case a file under shrunk/ (`<fault>.json`: the fault, its
config, rank mode, catalog, the GPUs a run needs and the run's arguments);
a case that needs GPUs is marked `gpu(n)` and skips, saying why, where there
are fewer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.judge.verdict import Verdict
from faults.shrink.runs import run_shrunk
from hostio import gpu_count

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "shrunk"


def case_params(folder: Path) -> list:
    """Each case of `folder` as a pytest param named by its fault."""
    params = []
    for path in sorted(folder.glob("*.json")):
        case = json.loads(path.read_text())
        gpus = case["gpus"]
        marks = [pytest.mark.gpu(gpus)] if gpus else []
        if gpus:
            found = gpu_count()
            marks.append(
                pytest.mark.skipif(found < gpus, reason=f"needs {gpus} GPUs (found {found})")
            )
        params.append(pytest.param(case, id=case["fault"], marks=marks))
    return params


@pytest.mark.parametrize("case", case_params(CASES))
def test_the_fault_stays_killed_at_its_shrunk_input(case, tmp_path):
    result = run_shrunk(
        ROOT,
        ROOT / case["catalog"],
        case["fault"],
        case["config"],
        case["rank_mode"],
        case["args"],
        tmp_path,
    )
    assert result.verdict is Verdict.KILLED, result.reason
