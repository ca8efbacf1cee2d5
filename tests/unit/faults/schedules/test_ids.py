"""Run ids (docs/operators.md, "Seeded schedules and replay"): from a run
to its id and back, and a bad one named with the form."""

from __future__ import annotations

import pytest

from faults.judge.run_result import RunResult
from faults.schedules.ids import RunId, base_id, parse_run_id


def test_a_run_id_goes_both_ways():
    run = parse_run_id("N2s.pct~s3@bf16-graph@2048#1")
    assert run == RunId("N2s.pct", 3, "bf16-graph@2048", 1)
    assert str(run) == "N2s.pct~s3@bf16-graph@2048#1" and run.label == "N2s.pct~s3"
    plain = parse_run_id("gen.skip.cf.ffn_stream_expand.row_wait@bf16-graph#0")
    assert plain == RunId("gen.skip.cf.ffn_stream_expand.row_wait", None, "bf16-graph", 0)
    result = RunResult("N2s.pct~s3", "bf16-graph@2048", 1, "KILLED", True, "r", "d")
    assert result.run_id == str(run)
    assert base_id("N2s.pct~s3") == "N2s.pct" and base_id("N2s.pct") == "N2s.pct"
    with pytest.raises(ValueError) as error:
        parse_run_id("N2-bf16-eager")
    assert str(error.value) == (
        "run id 'N2-bf16-eager': not of the form <fault>[~s<seed>]@<config>#<repeat>"
    )
