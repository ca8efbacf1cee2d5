"""The ffn_expand micro-bench on the CPU: its arguments, its report and the
bytes it counts."""

from __future__ import annotations

import json

import pytest
import torch

from afdep.jit import CSRC
from hostio import UsageError
from tools.bench import expand
from tools.bench.micro import card_bounds

PROG = "python -m tools.bench.expand"
H200 = card_bounds("NVIDIA H200")
H100 = card_bounds("NVIDIA H100 80GB HBM3")


def test_defaults_are_the_package_tree_five_sizes_and_both_grids(tmp_path):
    args = expand.checked_arguments(["--results-dir", str(tmp_path)])
    assert (args.tree, args.tokens, args.ctas) == ([CSRC], [128, 512, 1024, 2048, 4096], None)
    assert (args.iters, args.warmup, args.reps) == (50, 10, 20)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tokens", "0"], f"{PROG}: error: argument --tokens: at least 1, got 0\n"),
        (["--ctas", "0"], f"{PROG}: error: argument --ctas: at least 1, got 0\n"),
        (["--iters", "x"], f"{PROG}: error: argument --iters: an integer, got 'x'\n"),
    ],
)
def test_a_bad_number_is_one_line_naming_its_argument(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        expand.checked_arguments(argv)
    assert (caught.value.code, capsys.readouterr().err) == (2, message)


def test_a_tree_without_kernels_or_named_twice_is_refused(tmp_path):
    with pytest.raises(UsageError) as caught:
        expand.checked_arguments(["--tree", str(tmp_path)])
    assert str(caught.value) == f"--tree {tmp_path}: holds no kernel sources (no impls/ folder)"
    with pytest.raises(UsageError) as caught:
        expand.checked_arguments(["--tree", str(CSRC), "--tree", str(CSRC)])
    assert str(caught.value) == "--tree: a tree is named twice"


def test_without_a_gpu_main_says_so_in_one_line(monkeypatch, gpus_seen, capsys, tmp_path):
    for name in ("CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING"):
        monkeypatch.setenv(name, "kept")  # restored after the test
    gpus_seen(0)
    assert expand.main(["--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"{PROG}: error: needs a GPU, found 0\n"


def test_the_bytes_are_a_slot_read_per_routed_token_and_a_row_written_per_route():
    """Padding rows and a token routed nowhere move nothing; a token routed
    to three experts is read once and written three times."""
    g = expand.geometry(8)
    routes = torch.full((8, 8), -1, dtype=torch.int64)
    routes[0, :3] = torch.tensor([4, 9, 70])
    routes[2, 0] = 5
    routes[6, 0] = 1  # past num_tokens: padding
    traffic = expand.traffic_of(routes, 4, g)
    assert (g.row_bytes, g.slot_meta_bytes) == (4096, 112)
    assert (traffic.read_bytes, traffic.written_bytes) == (2 * (4096 + 112), 4 * 4096)


def test_the_report_names_trees_by_index_with_the_grid_used():
    row = {"tree": "/a", "tokens": 2048, "ctas": 108, "us": 20.0, "bitwise": True}
    row |= {"read_bytes": 2**23, "written_bytes": 2**26, "gbps": 3774.9, "hbm_bound_us": 15.73}
    document = {"rank_mode": "1xH200, 2 logical ranks", "trees": {"/a": "ab12"}, "rows": [row]}
    document["notes"] = expand.notes(H200)
    lines = expand.table_lines(document)
    assert lines[0] == "# ffn_expand, 1xH200, 2 logical ranks"
    assert lines[2] == "- tree `/a`: source digest `ab12`"
    assert lines[6] == "| #0 | 2048 | 108 | 20.00 | 8.00 | 64.00 | 3774.9 | 15.73 | ok |"
    assert lines[-1].startswith(
        "- HBM bound: the read and written bytes at 4.8 TB/s (H200 datasheet, HBM3e); "
    )


def test_a_row_s_hbm_bound_is_its_bytes_at_the_card_s_bandwidth():
    """8.2 MiB read and 64 MiB written: 15.78 µs at the H200's 4.8 TB/s, 22.61 µs
    at the H100 SXM's 3.35 TB/s."""
    traffic = expand.Traffic(tokens_read=2048, rows_written=2048 * 8, g=expand.geometry(2048))
    assert (traffic.read_bytes, traffic.written_bytes) == (2048 * (4096 + 112), 2**26)
    assert expand.row_figures(traffic, 20.0, H200) == {
        "read_bytes": 8617984,
        "written_bytes": 67108864,
        "gbps": 3786.3,
        "hbm_bound_us": 15.78,
    }
    assert expand.row_figures(traffic, 20.0, H100)["hbm_bound_us"] == 22.61


def test_an_h100_run_states_the_h100_s_hbm_bound(one_gpu_named, monkeypatch, tmp_path):
    """The whole bench, its GPU work faked: the head, the rows and the note
    carry the H100 SXM's 3.35 TB/s."""
    one_gpu_named("NVIDIA H100 80GB HBM3")

    def measure(tree, tokens, ctas, args, bounds):
        g = expand.geometry(tokens)
        traffic = expand.Traffic(tokens_read=tokens, rows_written=tokens * 8, g=g)
        row = {"tree": str(tree), "tokens": tokens, "ctas": ctas or 108, "us": 20.0}
        return row | expand.row_figures(traffic, 20.0, bounds) | {"bitwise": True}

    monkeypatch.setattr(expand, "measure", measure)
    assert expand.main(["--tokens", "2048", "--results-dir", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "expand-1xH100.json").read_text())
    assert document["bounds"]["card"] == "H100 SXM"
    assert [row["hbm_bound_us"] for row in document["rows"]] == [22.61, 22.61]  # 24 CTAs, all
    report = (tmp_path / "expand-1xH100.md").read_text().splitlines()
    assert report[-1].startswith(
        "- HBM bound: the read and written bytes at 3.35 TB/s (H100 datasheet, SXM5 HBM3); "
    )


def test_a_rank_that_raised_is_one_line_per_rank_not_a_traceback(tmp_path, capsys):
    """A logical rank's error (here rank 0's; rank 1 finds the barrier broken)
    ends a micro-bench in one line per rank naming the error and where."""
    from afdep.ranks import LocalWorld
    from tools.bench import micro

    def body(group):
        if group.rank == 0:
            raise RecursionError("maximum recursion depth exceeded")
        group.barrier()

    def run(args):
        return LocalWorld(2).run(body)

    main = micro.program(PROG, expand.checked_arguments, run)
    assert main(["--results-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    raised_at = body.__code__.co_firstlineno + 2
    assert err[0] == (
        f"{PROG}: logical rank 0: RecursionError: maximum recursion depth exceeded"
        f" (at test_expand.py:{raised_at})"
    )
    assert err[1].startswith(f"{PROG}: logical rank 1: BrokenBarrierError: ")
    assert len(err) == 2


def test_a_row_is_its_tree_and_tokens_then_its_figures_then_the_check():
    from tools.bench.micro_step import finished_row

    row = finished_row(CSRC, 128, [], ctas=24, us=1.5)
    assert list(row.items()) == [
        ("tree", str(CSRC)),
        ("tokens", 128),
        ("ctas", 24),
        ("us", 1.5),
        ("bitwise", True),
        ("mismatch", None),
    ]
    assert finished_row(CSRC, 1, ["slot 3"], us=2.0)["mismatch"] == "slot 3"
