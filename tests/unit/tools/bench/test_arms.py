from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch

import tools.bench.arms
from afdep.config import COUNT_FIRST_EVERY_BUCKET
from hostio import ProcessOutcome
from tools.bench.arms import parse_arm, rotated
from tools.bench.summary import geomean_change, paired_change, summarize, targets
from tools.driver.launch import torchrun_command


def test_parse_arm():
    assert parse_arm("CF:AFDEP_A=1,AFDEP_B=x") == ("CF", {"AFDEP_A": "1", "AFDEP_B": "x"})
    assert parse_arm("C:") == ("C", {})
    assert parse_arm("N:AFDEP_A=1,tree=/x/csrc") == ("N", {"AFDEP_A": "1", "tree": "/x/csrc"})
    for bad in ("CF:A=1", ":AFDEP_A=1", "CF:AFDEP_A", "N:tree="):
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
    arms = tools.bench.arms.DEFAULT_ARMS
    assert arms["CF"] == COUNT_FIRST_EVERY_BUCKET == {"AFDEP_COUNT_FIRST_MIN_BUCKET": "1"}
    assert arms["CF_attn"] == {**COUNT_FIRST_EVERY_BUCKET, "AFDEP_COUNT_FIRST_ARM": "attention"}


def test_each_process_is_the_worker_under_torchrun_without_tee(monkeypatch, tmp_path):
    commands = []

    def fake_run(command, log_path, *, timeout_s, env=None):
        commands.append(command)
        return ProcessOutcome(command, 1, 0.1, False, str(tmp_path / "x.log"), "0" * 64)

    (tmp_path / "x.log").write_text("no GPUs in this test\n")
    monkeypatch.setattr(tools.bench.arms, "run_logged", fake_run)
    monkeypatch.setattr(tools.bench.arms, "gpu_count", lambda: 2)
    argv = ["--logs-dir", str(tmp_path), "--arm", "C:", "--buckets", "8", "--iters", "3"]
    assert tools.bench.arms.main(argv) == 1
    worker_args = ["--arms", json.dumps({"C": {}}), "--order", "C", "--buckets", "8"]
    worker_args += ["--iters", "3"]  # the default trace and overlap buckets are not among them
    assert commands == [torchrun_command(2, "tools.bench.worker", worker_args, tee=False)]


@pytest.fixture
def two_gpus(monkeypatch, tmp_path):
    """tools.bench.arms on a machine it takes for 2 GPUs: each process is a fake
    that prints `outputs`' next AFDEP_BENCH document, or exits 1 when it is
    None (raises KeyboardInterrupt when it is "interrupt"). Temporary folders
    go under tmp/."""
    import tempfile

    outputs = []

    def fake_run(command, log_path, *, timeout_s, env=None):
        output = outputs.pop(0)
        if output == "interrupt":
            raise KeyboardInterrupt
        Path(log_path).write_text(f"AFDEP_BENCH {json.dumps(output)}\n" if output else "boom\n")
        return ProcessOutcome(command, 0 if output else 1, 0.1, False, str(log_path), "0" * 64)

    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(tools.bench.arms, "run_logged", fake_run)
    monkeypatch.setattr(tools.bench.arms, "gpu_count", lambda: 2)
    monkeypatch.setattr(tools.bench.arms, "machine_name", lambda: "2xH200")
    return outputs


def worker_output(c: float, a: float) -> dict:
    return {**process(c, a), "native_source_sha256": "b" * 64, "row_bytes": 4096, "traces": {}}


def bench(tmp_path, *words: str) -> int:
    arms = ["--arm", "C:", "--arm", "A:AFDEP_PAYLOAD_FIRST=1", "--buckets", "2048"]
    return tools.bench.arms.main([*arms, "--results-dir", str(tmp_path / "results"), *words])


def temporary_folders(tmp_path) -> list[Path]:
    return sorted((tmp_path / "tmp").iterdir())


def test_a_screen_writes_its_document_and_removes_its_temporary_logs(two_gpus, tmp_path, capsys):
    two_gpus += [worker_output(100, 90), worker_output(100, 110)]
    assert bench(tmp_path, "--processes", "2", "--tag", "x") == 0
    assert temporary_folders(tmp_path) == []
    path = tmp_path / "results" / "bench-2xH200-x.json"
    document = json.loads(path.read_text())
    assert list(document) == [
        "tool",
        "machine",
        "arms",
        "control",
        "native_source_sha256",
        "buckets",
        "worker_args",
        "table",
        "targets",
        "traces",
        "overlap",
        "processes",
    ]
    assert document["arms"] == {"C": {}, "A": {"AFDEP_PAYLOAD_FIRST": "1"}}
    assert document["table"][0]["A"]["paired_change_pct"] == [-10.0, 10.0]
    assert document["targets"]["C.dispatch_2048_vs_peer_copy"] == round(
        2048 * 4096 / 25.0 / 1e3 / 400, 3
    )
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["process 0: order C A done", "process 1: order A C done"]
    assert out[-1] == f"wrote {path} and {path.with_suffix('.md')}"
    assert path.with_suffix(".md").read_text().startswith("# Bench on 2xH200\n")


def test_a_failed_process_keeps_the_temporary_logs_and_names_them(two_gpus, tmp_path, capsys):
    two_gpus += [worker_output(100, 90), None]
    assert bench(tmp_path, "--processes", "2") == 1
    [kept] = temporary_folders(tmp_path)
    assert sorted(path.name for path in kept.iterdir()) == ["bench-0.log", "bench-1.log"]
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "process 0: order C A done",
        f"logs kept (a run failed): {kept}",
    ]
    assert captured.err == (
        f"bench process 1 failed (exit 1); log {kept / 'bench-1.log'}:\nboom\n\n"
    )
    assert not (tmp_path / "results").exists()


def test_keep_keeps_the_temporary_logs_of_a_success(two_gpus, tmp_path, capsys):
    two_gpus += [worker_output(100, 90)]
    assert bench(tmp_path, "--processes", "1", "--keep") == 0
    [kept] = temporary_folders(tmp_path)
    assert (kept / "bench-0.log").exists()
    assert capsys.readouterr().out.splitlines()[-1] == f"logs kept (--keep): {kept}"


def test_an_explicit_logs_dir_is_kept(two_gpus, tmp_path, capsys):
    two_gpus += [worker_output(100, 90)]
    assert bench(tmp_path, "--processes", "1", "--logs-dir", str(tmp_path / "logs")) == 0
    assert temporary_folders(tmp_path) == []
    assert (tmp_path / "logs" / "bench-0.log").exists()
    out = capsys.readouterr().out  # the user named it: it stays, and needs no word
    assert out.splitlines()[-1].startswith("wrote ") and "logs kept" not in out


def test_an_interrupted_screen_keeps_its_logs_and_reraises(two_gpus, tmp_path, capsys):
    two_gpus += [worker_output(100, 90), "interrupt"]
    arms = ["--arm", "C:", "--arm", "A:", "--buckets", "2048", "--processes", "2"]
    with pytest.raises(KeyboardInterrupt):  # entry_point, around main, says the one line
        tools.bench.arms.main.__wrapped__([*arms, "--results-dir", str(tmp_path / "results")])
    [kept] = temporary_folders(tmp_path)
    assert (kept / "bench-0.log").exists()
    assert capsys.readouterr().out.splitlines()[-1] == f"logs kept (interrupted): {kept}"


def test_an_output_that_is_not_json_is_a_failed_process(two_gpus, monkeypatch, tmp_path, capsys):
    def truncated(command, log_path, *, timeout_s, env=None):
        Path(log_path).write_text('AFDEP_BENCH {"ranks": [\n')
        return ProcessOutcome(command, 0, 0.1, False, str(log_path), "0" * 64)

    monkeypatch.setattr(tools.bench.arms, "run_logged", truncated)
    assert bench(tmp_path, "--processes", "1") == 1
    [kept] = temporary_folders(tmp_path)
    assert capsys.readouterr().err.splitlines()[0] == (
        "bench process 0 failed (its AFDEP_BENCH line is not JSON: Expecting value: line 1 "
        f"column 12 (char 11)); log {kept / 'bench-0.log'}:"
    )


def test_each_source_rank_sends_its_own_routes():
    from afdep.workspace import Geometry
    from tools.bench.worker import bucket_inputs

    g = Geometry(
        world_size=3, ffn_ranks=1, num_experts=128, capacity=256, hidden=512, top_k=8,
        payload="bf16",
    )  # fmt: skip
    first, second = (bucket_inputs(rank, 128, g, "cpu") for rank in (0, 1))
    assert not torch.equal(first.topk_idx, second.topk_idx)
    assert torch.equal(bucket_inputs(1, 128, g, "cpu").topk_idx, second.topk_idx)
    assert int((first.topk_idx[128:] != -1).sum()) == 0  # padding rows route nowhere


def test_a_tree_arm_builds_its_own_sources_and_iso_copies_the_control(tmp_path):
    from afdep.jit import CSRC, source_digest
    from tools.bench.arms import ISO, TREE, iso_arm
    from tools.bench.worker import arm_attentions, arm_config

    (tmp_path / "iso-csrc").mkdir()  # an earlier run's copy goes first
    (tmp_path / "iso-csrc/stale.cuh").write_text("x")
    arm = iso_arm({"AFDEP_PAYLOAD_FIRST": "1"}, tmp_path / "iso-csrc")
    assert arm == {"AFDEP_PAYLOAD_FIRST": "1", TREE: str(tmp_path / "iso-csrc")}
    assert source_digest(arm_attentions(arm)) == source_digest(CSRC) and ISO == "ISO"
    assert arm_attentions({"AFDEP_PAYLOAD_FIRST": "1"}) is None
    assert arm_config(arm).payload_first


def test_the_nccl_exchange_sizes_agree_between_every_pair_of_ranks():
    from tools.bench.worker import exchange_sizes, rows_per_ffn

    topk = torch.tensor([[0, 70], [1, 2], [-1, 100]])
    assert rows_per_ffn(topk, 2, 64) == [2, 2]  # experts 0-63 and 64-127
    routed = [[3, 1], [0, 5]]  # two sources' rows to each of two FFN ranks
    sizes = [exchange_sizes(rank, 2, routed, 10, 4) for rank in range(4)]
    for p in range(4):
        for q in range(4):
            assert sizes[p].send[q] == sizes[q].receive[p]
            assert sizes[p].back_send[q] == sizes[q].back_receive[p]
    assert sizes[0].send == [0, 0, 30, 10] and sizes[3].receive == [10, 50, 0, 0]
    assert sizes[3].back_send == [8, 40, 0, 0]  # one bf16 row of 4 back per row received


def test_the_worker_takes_the_collect_view():
    from tools.bench.worker import parse_args

    words = ["--arms", "{}", "--order", "C", "--buckets", "8"]
    assert parse_args([*words, "--collect-view"]).collect_view is True
    assert parse_args(words).collect_view is False


def test_the_overlap_screen_rows_and_gate():
    from tools.bench.overlap import overlap_lines, overlap_rows, summary

    figures = summary([30.0, 31.0, 30.5], [31.2, 32.5, 31.0], [300.0, 310.0, 305.0])
    assert figures == {
        "gemm_alone_us": 30.5,
        "gemm_beside_exchange_us": 31.2,
        "gemm_added_us": 0.7,
        "exchange_beside_gemms_us": 305.0,
    }
    slower = {**figures, "gemm_beside_exchange_us": 33.0, "gemm_added_us": 2.5}

    def rank(number, role, arm_figures):
        overlap = {arm: {"2048": f} for arm, f in arm_figures.items()}
        return {"rank": number, "role": role, "results": {"overlap": overlap}}

    process = {"ranks": [rank(0, "attention", {"C": figures, "CF": figures}),
                         rank(1, "ffn", {"C": figures, "CF": slower})]}  # fmt: skip
    rows = overlap_rows([process, process], ["C", "CF"])
    assert [(r["arm"], r["role"], r.get("gate_ok")) for r in rows] == [
        ("C", "attention", None),
        ("C", "ffn", True),
        ("CF", "attention", None),
        ("CF", "ffn", False),
    ]
    lines = overlap_lines(rows)
    assert lines[4] == "| 2048 | C | attention | 30.50 | 31.20 | +0.70 | 305.0 |  |"
    assert lines[7] == "| 2048 | CF | ffn | 30.50 | 33.00 | +2.50 | 305.0 | MISSED |"
    assert overlap_rows([{"ranks": [{"rank": 0, "role": "ffn", "results": {}}]}], ["C"]) == []


def test_iso_copies_the_controls_own_tree_and_a_tree_must_keep_the_host_layout(tmp_path):
    import shutil

    from afdep.jit import CSRC, source_digest
    from tools.bench.arms import TREE, iso_arm, tree_problem

    old = tmp_path / "old"
    shutil.copytree(CSRC, old)
    (old / "impls/extra.cuh").write_text("// another kernel tree\n")
    arm = iso_arm({TREE: str(old)}, tmp_path / "iso")
    assert arm == {TREE: str(tmp_path / "iso")}
    assert source_digest(tmp_path / "iso") == source_digest(old) != source_digest(CSRC)
    assert tree_problem("N", str(old)) is None
    (old / "common/params.cuh").write_text("// fields moved\n")
    assert tree_problem("N", str(old)) == (
        f"--arm N: tree {old}: common/params.cuh differs from this package's "
        "(its host side reads that layout)"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--arm", "C:", "--arm", "nccl:"], "--arm nccl: the name of a reference's results"),
        (["--buckets", "8", "--overlap-buckets", "2048"], "--overlap-buckets 2048: not one of"),
        (["--buckets", "8", "--trace-buckets", "9"], "--trace-buckets 9: not one of --buckets [8]"),
    ],
)
def test_a_bench_that_cannot_start_says_why_in_one_line(capsys, argv, message):
    assert tools.bench.arms.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"afdep bench: error: {message}") and len(err.splitlines()) == 1
