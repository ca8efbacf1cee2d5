from __future__ import annotations

import argparse
import json

import pytest

import afdep.bench
from afdep.bench import geomean_change, paired_change, parse_arm, rotated, summarize, targets
from afdep.config import COUNT_FIRST_EVERY_BUCKET
from afdep.testing.launch import torchrun_command
from hostio import ProcessOutcome


def test_parse_arm():
    assert parse_arm("CF:AFDEP_A=1,AFDEP_B=x") == ("CF", {"AFDEP_A": "1", "AFDEP_B": "x"})
    assert parse_arm("C:") == ("C", {})
    for bad in ("CF:A=1", ":AFDEP_A=1", "CF:AFDEP_A"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_arm(bad)


def test_rotation_and_changes():
    assert [rotated(["C", "A", "B"], i) for i in range(3)] == [
        ["C", "A", "B"],
        ["A", "B", "C"],
        ["B", "C", "A"],
    ]
    assert paired_change(90.0, 100.0) == pytest.approx(-10.0)
    assert geomean_change([-10.0, -10.0]) == pytest.approx(-10.0)
    assert geomean_change([100.0, -50.0]) == pytest.approx(0.0)


def process(c: float, a: float) -> dict:
    cell = lambda us: {"round_trip_us": us, "dispatch_us": us / 4}  # noqa: E731
    results = {
        "C": {"2048": cell(c)},
        "A": {"2048": cell(a)},
        "nccl": {"2048": {"round_trip_us": 3 * c}},
        "peer_copy": {"2048": {"copy_us": 10.0, "gb_per_s": 400.0}},
    }
    return {"ranks": [{"rank": 0, "results": results}]}


def test_summary_and_targets():
    rows = summarize([process(100, 90), process(100, 110), process(100, 80)], ["C", "A"], [2048])
    row = rows[0]
    assert row["C"]["median_us"] == 100 and row["A"]["median_us"] == 90
    assert row["A"]["paired_change_pct"] == [-10.0, 10.0, -20.0]
    assert row["A"]["repeats_faster"] == 2
    assert row["nccl_round_trip_us"] == 300 and row["peer_copy_gb_per_s"] == 400.0
    ratios = targets(rows, ["C", "A"], row_bytes=4096)
    assert ratios["C.dispatch_2048_vs_peer_copy"] == round(2048 * 4096 / 25.0 / 1e3 / 400, 3)


def test_default_arms_force_count_first_with_the_shared_environment():
    arms = afdep.bench.DEFAULT_ARMS
    assert arms["CF"] == COUNT_FIRST_EVERY_BUCKET == {"AFDEP_COUNT_FIRST_MIN_BUCKET": "1"}
    assert arms["CF_src"] == {**COUNT_FIRST_EVERY_BUCKET, "AFDEP_COUNT_FIRST_ARM": "source"}


def test_each_process_is_the_worker_under_torchrun_without_tee(monkeypatch, tmp_path):
    commands = []

    def fake_run(command, log_path, *, timeout_s, env=None):
        commands.append(command)
        return ProcessOutcome(command, 1, 0.1, False, str(tmp_path / "x.log"), "0" * 64)

    (tmp_path / "x.log").write_text("no GPUs in this test\n")
    monkeypatch.setattr(afdep.bench, "run_logged", fake_run)
    monkeypatch.setattr(afdep.bench, "gpu_count", lambda: 2)
    argv = ["--logs-dir", str(tmp_path), "--arm", "C:", "--buckets", "8", "--iters", "3"]
    assert afdep.bench.main(argv) == 1
    worker_args = ["--arms", json.dumps({"C": {}}), "--order", "C", "--buckets", "8"]
    worker_args += ["--iters", "3", "--trace-buckets", "512", "2048"]
    assert commands == [torchrun_command(2, "afdep.bench.worker", worker_args, tee=False)]
