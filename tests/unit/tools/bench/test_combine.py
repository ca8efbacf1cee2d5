"""The ffn_combine micro-bench on the CPU: its arguments, its byte and
bandwidth arithmetic, its report, and every ffn_combine variant compiling."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
import torch

from afdep.jit import CSRC, KernelSpec, compile_kernel
from hostio import UsageError
from tools.bench import combine
from tools.bench.combine import (
    Traffic,
    attention_figures,
    bound_us,
    gbps,
    row_figures,
    traffic_of,
)
from tools.bench.micro import card_bounds

PROG = "python -m tools.bench.combine"
H200 = card_bounds("NVIDIA H200")
H100 = card_bounds("NVIDIA H100 80GB HBM3")


def test_the_2048_token_top8_combine_moves_64_mib_in_and_8_mib_out():
    traffic = Traffic(rows_read=2048 * 8, tokens_written=2048, hidden=2048)
    assert (traffic.read_bytes, traffic.written_bytes) == (64 * 2**20, 8 * 2**20)
    assert bound_us(traffic.read_bytes, 4800) == 67108864 / 4.8e6
    assert bound_us(traffic.written_bytes, 450) == 8388608 / 4.5e5
    assert gbps(75497472, 30.0) == 2516.5824
    assert row_figures(traffic, 30.0, H200) == {
        "read_bytes": 67108864,
        "written_bytes": 8388608,
        "gbps": 2516.6,
        "hbm_read_bound_us": 13.98,
        "nvlink_write_bound_us": 18.64,
    }


def test_on_an_h100_the_same_bytes_are_bound_at_its_3_35_tbps():
    traffic = Traffic(rows_read=2048 * 8, tokens_written=2048, hidden=2048, num_tokens=2048)
    figures = row_figures(traffic, 30.0, H100)
    assert (figures["hbm_read_bound_us"], figures["nvlink_write_bound_us"]) == (20.03, 18.64)
    assert attention_figures(traffic, 7.5, H100)["attention_hbm_bound_us"] == 5.01  # 16 MiB


def test_traffic_counts_unmasked_slots_and_routed_tokens_below_num_tokens():
    topk = torch.tensor([[3, -1, 5], [-1, -1, -1], [0, 1, 2], [7, 8, 9]])
    assert traffic_of(topk, 3, 128) == Traffic(
        rows_read=5, tokens_written=2, hidden=128, num_tokens=3
    )
    assert traffic_of(topk, 3, 128).read_bytes == 5 * 128 * 2


def test_attention_combine_reads_every_partial_and_writes_every_row():
    """A token routed nowhere is written too (+0), so 3 rows out for 2 partials in."""
    traffic = Traffic(rows_read=5, tokens_written=2, hidden=128, num_tokens=3)
    assert traffic.attention_bytes == (2 + 3) * 128 * 2
    at_2048 = Traffic(rows_read=2048 * 8, tokens_written=2048, hidden=2048, num_tokens=2048)
    assert attention_figures(at_2048, 7.004, H200) == {
        "attention_us": 7.0,
        "attention_hbm_bound_us": 3.5,  # 16 MiB at 4.8 TB/s
    }


def test_defaults_are_the_package_tree_and_five_sizes(tmp_path):
    args = combine.checked_arguments(["--results-dir", str(tmp_path)])
    assert (args.tree, args.tokens, args.ctas) == ([CSRC], [128, 512, 1024, 2048, 4096], None)
    assert (args.iters, args.warmup, args.reps) == (50, 10, 20)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tokens", "0"], f"{PROG}: error: argument --tokens: at least 1, got 0\n"),
        (["--ctas", "x"], f"{PROG}: error: argument --ctas: an integer, got 'x'\n"),
        (["--iters", "0"], f"{PROG}: error: argument --iters: at least 1, got 0\n"),
    ],
)
def test_a_bad_number_is_one_line_naming_its_argument(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        combine.checked_arguments(argv)
    assert (caught.value.code, capsys.readouterr().err) == (2, message)


def test_a_tree_without_kernels_is_refused_naming_it(tmp_path):
    with pytest.raises(UsageError) as caught:
        combine.checked_arguments(["--tree", str(tmp_path)])
    assert str(caught.value) == f"--tree {tmp_path}: holds no kernel sources (no impls/ folder)"


def test_a_tree_whose_host_interface_differs_is_refused(tmp_path):
    tree = tmp_path / "csrc"
    shutil.copytree(CSRC, tree)
    (tree / "common/params.cuh").write_text("// another layout\n")
    with pytest.raises(UsageError) as caught:
        combine.checked_arguments(["--tree", str(tree)])
    assert str(caught.value) == (
        f"--tree {tree}: common/params.cuh differs from this package's (its host side reads it)"
    )


def test_a_tree_may_change_the_helpers_beside_params_but_not_its_fields(tmp_path):
    tree = tmp_path / "csrc"
    shutil.copytree(CSRC, tree)
    params = tree / "common/params.cuh"
    text = params.read_text()
    params.write_text(
        text.replace("namespace afdep {", "namespace afdep {\n// a helper's comment", 1)
    )
    assert combine.checked_arguments(["--tree", str(tree)]).tree == [tree]
    params.write_text(
        text.replace("u64 off_done;\n  u64 off_counts;", "u64 off_counts;\n  u64 off_done;")
    )
    with pytest.raises(UsageError) as caught:
        combine.checked_arguments(["--tree", str(tree)])
    assert str(caught.value) == (
        f"--tree {tree}: common/params.cuh differs from this package's (its host side reads it)"
    )


def test_a_tree_may_change_the_warp_helpers_but_not_the_slot_layout(tmp_path):
    tree = tmp_path / "csrc"
    shutil.copytree(CSRC, tree)
    layout = tree / "common/layout.cuh"
    text = layout.read_text()
    helper = "__device__ __forceinline__ int warp_inclusive_sum("
    assert helper in text
    layout.write_text(text.replace(helper, "// a helper's comment\n" + helper, 1))
    assert combine.checked_arguments(["--tree", str(tree)]).tree == [tree]
    field = "  i32 collect_pos;"
    assert field in text
    layout.write_text(text.replace(field, "  i32 padding;\n" + field, 1))
    with pytest.raises(UsageError) as caught:
        combine.checked_arguments(["--tree", str(tree)])
    assert str(caught.value) == (
        f"--tree {tree}: common/layout.cuh differs from this package's (its host side reads it)"
    )


def test_a_tree_named_twice_is_refused():
    with pytest.raises(UsageError) as caught:
        combine.checked_arguments(["--tree", str(CSRC), "--tree", str(CSRC)])
    assert str(caught.value) == "--tree: a tree is named twice"


def test_a_results_dir_that_is_a_file_is_refused(tmp_path):
    where = tmp_path / "file"
    where.write_text("")
    with pytest.raises(UsageError) as caught:
        combine.checked_arguments(["--results-dir", str(where)])
    assert str(caught.value) == f"--results-dir {where}: not a directory"


def test_without_a_gpu_main_says_so_in_one_line(monkeypatch, gpus_seen, capsys, tmp_path):
    for name in ("CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING"):
        monkeypatch.setenv(name, "kept")  # restored after the test
    gpus_seen(0)
    assert combine.main(["--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"{PROG}: error: needs a GPU, found 0\n"


def test_the_report_names_trees_by_index_and_states_both_bounds():
    row = {"tree": "/a", "tokens": 2048, "ctas": 132, "us": 30.0, "bitwise": True}
    traffic = Traffic(16384, 2048, 2048, 2048)
    row.update(row_figures(traffic, 30.0, H200), **attention_figures(traffic, 7.5, H200))
    document = {"rank_mode": "1xH200, 2 logical ranks", "trees": {"/a": "ab12"}, "rows": [row]}
    document["notes"] = combine.notes(H200)
    lines = combine.table_lines(document)
    assert lines[0] == "# ffn_combine, then attention_combine, 1xH200, 2 logical ranks"
    assert lines[2] == "- tree `/a`: source digest `ab12`"
    assert lines[6] == (
        "| #0 | 2048 | 132 | 30.00 | 64.00 | 8.00 | 2516.6 | 13.98 | 18.64 | 7.50 | 3.50 | ok |"
    )
    assert lines[-3] == "- HBM read bound: the read bytes at 4.8 TB/s (H200 datasheet, HBM3e)"
    assert lines[-2] == (
        "- logical mode: the partials land in this GPU's HBM, not over NVLink; the NVLink "
        "write bound is the written bytes at 450 GB/s per direction (H200 datasheet: 900 GB/s "
        "bidirectional), what a rank per GPU adds"
    )
    assert lines[-1].startswith("- attention_combine: the partials read (one per routed token")
    assert lines[-1].endswith(
        ", at 4.8 TB/s: in both rank modes the partials sit in the attention rank's own HBM"
    )


def test_an_h100_run_writes_its_rows_and_notes_at_the_h100_s_bounds(
    one_gpu_named, monkeypatch, tmp_path
):
    """The whole bench, its GPU work faked: a run on an H100 SXM states 3.35 TB/s,
    never the H200's 4.8, in its head, its rows and its notes."""
    one_gpu_named("NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda device: SimpleNamespace(multi_processor_count=132),
    )

    def measure(tree, tokens, ctas, args, bounds):
        traffic = Traffic(tokens * 8, tokens, 2048, tokens)
        figures = row_figures(traffic, 30.0, bounds) | attention_figures(traffic, 7.5, bounds)
        return {
            "tree": str(tree),
            "tokens": tokens,
            "ctas": ctas,
            "us": 30.0,
            **figures,
            "bitwise": True,
            "mismatch": None,
        }

    monkeypatch.setattr(combine, "measure", measure)
    assert combine.main(["--tokens", "2048", "--ctas", "132", "--results-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "combine-1xH100.json").read_text())
    assert (document["bounds"]["card"], document["bounds"]["hbm_gbps"]) == ("H100 SXM", 3350)
    [row] = document["rows"]
    assert (row["hbm_read_bound_us"], row["nvlink_write_bound_us"]) == (20.03, 18.64)
    assert row["attention_hbm_bound_us"] == 5.01
    report = (tmp_path / "combine-1xH100.md").read_text().splitlines()
    assert report[0] == "# ffn_combine, then attention_combine, 1xH100, 2 logical ranks"
    assert report[7].endswith("| 20.03 | 18.64 | 7.50 | 5.01 | ok |")
    assert report[-3:] == [f"- {note}" for note in document["notes"]]
    assert report[-3] == (
        "- HBM read bound: the read bytes at 3.35 TB/s (H100 datasheet, SXM5 HBM3)"
    )
    assert "(H100 datasheet, SXM5: 900 GB/s bidirectional)" in report[-2]
    assert ", at 3.35 TB/s: in both rank modes" in report[-1]
    assert "4.8 TB/s" not in "\n".join(report) and "H200" not in "\n".join(report)


def test_the_graph_node_floor_follows_the_trees_once_measured():
    document = {"rank_mode": "1xH200, 2 logical ranks", "trees": {"/a": "ab12"}, "rows": []}
    document |= {"node_floor_us": 2.5, "notes": combine.notes(H200)}
    lines = combine.table_lines(document)
    assert lines[3] == (
        "- a kernel that does nothing costs 2.50 µs a launch in the same graph "
        "(a one-element add_): the floor under every row"
    )


@pytest.mark.parametrize("hidden", [128, 2048, 7168])
@pytest.mark.parametrize("top_k", [1, 4, 8, 12, 16, 24, 32])
def test_every_ffn_combine_variant_compiles(hidden, top_k):
    spec = KernelSpec.make("ffn_combine", kHidden=hidden, kTopK=top_k, kNumThreads=512)
    assert compile_kernel(spec).cubin[:4] == b"\x7fELF"


def test_an_unknown_afdep_variable_is_refused_before_any_work(monkeypatch):
    monkeypatch.setenv("AFDEP_COMBINE_CTAS", "8")
    with pytest.raises(UsageError) as caught:
        combine.checked_arguments([])
    assert str(caught.value).startswith(
        "unknown afdep variable AFDEP_COMBINE_CTAS; known: ['AFDEP_COMBINE_SMS', "
    )
