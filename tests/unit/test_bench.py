from __future__ import annotations

import argparse

import pytest

from afdep.bench import geomean_change, paired_change, parse_arm, rotated, summarize, targets


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
