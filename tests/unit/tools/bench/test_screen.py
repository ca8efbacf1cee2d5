"""afdep screen: the bench commands per split and the comparison with the recorded changes."""

from __future__ import annotations

from pathlib import Path

import tools.bench.arms
from hostio import ProcessOutcome
from tools.bench.screen import RECORDED_CF_CHANGE_PCT, bench_args, comparison


def test_each_split_runs_the_bench_on_4_gpus_with_its_ffn_ranks(monkeypatch, tmp_path):
    commands = []

    def fake_run(command, log_path, *, timeout_s, env=None):
        commands.append(command)
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text("no GPUs in this test\n")
        return ProcessOutcome(command, 1, 0.1, False, str(log_path), "0" * 64)

    monkeypatch.setattr(tools.bench.arms, "run_logged", fake_run)
    monkeypatch.setattr(tools.bench.arms, "gpu_count", lambda: 4)  # tools.bench.arms refuses fewer
    assert (
        tools.bench.arms.main(["--logs-dir", str(tmp_path), *bench_args("1a3f", 3, tmp_path)]) == 1
    )
    command = commands[0]
    assert "--nproc-per-node=4" in command
    tail = command[command.index("--order") :]
    assert tail[-4:] == ["--ffn-ranks", "3", "--num-experts", "96"]
    assert ["--trace-buckets", "2048"] == tail[tail.index("--trace-buckets") :][:2]
    assert command[command.index("--buckets") + 1 : command.index("--buckets") + 4] == [
        "512",
        "1024",
        "2048",
    ]


def test_the_comparison_sets_each_row_beside_the_seed():
    row = {
        "tokens": 2048,
        "C": {"median_us": 300.0, "geomean_change_pct": 0.0, "repeats_faster": 0},
        "CF": {"median_us": 270.0, "geomean_change_pct": -10.0, "repeats_faster": 3},
    }
    assert comparison({"2a2f": [row]}) == [
        {
            "split": "2a2f",
            "tokens": 2048,
            "C_us": 300.0,
            "CF_us": 270.0,
            "CF_change_pct": -10.0,
            "CF_repeats_faster": 3,
            "recorded_CF_change_pct": -7.3,
        }
    ]
    assert set(RECORDED_CF_CHANGE_PCT) == {"3a1f", "2a2f", "1a3f"}


def test_3a1f_is_compared_with_the_shipped_tree_not_a_rejected_variant():
    from tools.bench.screen import recorded_cell

    assert RECORDED_CF_CHANGE_PCT["3a1f"] == {512: None, 1024: -4.1, 2048: -10.7}
    assert RECORDED_CF_CHANGE_PCT["1a3f"] == {512: 3.5, 1024: -0.0, 2048: -1.5}
    assert [recorded_cell(v) for v in (None, -10.7, 3.5)] == ["not recorded", "-10.7%", "+3.5%"]
