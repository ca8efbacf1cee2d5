"""The attention_dispatch micro-bench on the CPU: its arguments, its report, and
attention_dispatch compiling at every top-k a lane per slot allows."""

from __future__ import annotations

import json

import pytest
import torch

from afdep.jit import CSRC, KernelSpec, compile_kernel
from afdep.vocab import Protocol
from hostio import UsageError
from tools.bench import dispatch
from tools.bench.micro import card_bounds

PROG = "python -m tools.bench.dispatch"
H200 = card_bounds("NVIDIA H200")


def test_defaults_are_the_package_tree_five_sizes_and_a_4096_capacity(tmp_path):
    args = dispatch.checked_arguments(["--results-dir", str(tmp_path)])
    assert (args.tree, args.tokens, args.capacity) == ([CSRC], [1, 128, 512, 2048, 4096], 4096)
    assert (args.iters, args.warmup, args.reps) == (50, 10, 20)
    assert args.protocol == [Protocol.PAYLOAD_FIRST]


def test_both_protocols_are_measured_each_once_in_the_order_given(tmp_path):
    argv = ["--protocol", "count-first", "--protocol", "payload-first", "--protocol", "count-first"]
    args = dispatch.checked_arguments(argv)
    assert args.protocol == [Protocol.COUNT_FIRST, Protocol.PAYLOAD_FIRST]
    assert dispatch.protocol_environ(Protocol.COUNT_FIRST)["AFDEP_COUNT_FIRST_MIN_BUCKET"] == "1"
    assert "AFDEP_COUNT_FIRST_MIN_BUCKET" not in dispatch.protocol_environ(Protocol.PAYLOAD_FIRST)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tokens", "0"], f"{PROG}: error: argument --tokens: at least 1, got 0\n"),
        (["--capacity", "x"], f"{PROG}: error: argument --capacity: an integer, got 'x'\n"),
        (["--reps", "0"], f"{PROG}: error: argument --reps: at least 1, got 0\n"),
        (
            ["--protocol", "cf"],
            f"{PROG}: error: argument --protocol: one of payload-first, count-first, got 'cf'\n",
        ),
    ],
)
def test_a_bad_number_is_one_line_naming_its_argument(argv, message, capsys):
    with pytest.raises(SystemExit) as caught:
        dispatch.checked_arguments(argv)
    assert (caught.value.code, capsys.readouterr().err) == (2, message)


def test_more_tokens_than_the_capacity_are_refused(tmp_path):
    with pytest.raises(UsageError) as caught:
        dispatch.checked_arguments(["--capacity", "100", "--tokens", "101"])
    assert str(caught.value) == "--tokens 101: more than --capacity 100"


def test_a_tree_without_kernels_is_refused_naming_it(tmp_path):
    with pytest.raises(UsageError) as caught:
        dispatch.checked_arguments(["--tree", str(tmp_path)])
    assert str(caught.value) == f"--tree {tmp_path}: holds no kernel sources (no impls/ folder)"


def test_without_a_gpu_main_says_so_in_one_line(monkeypatch, gpus_seen, capsys, tmp_path):
    for name in ("CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING"):
        monkeypatch.setenv(name, "kept")  # restored after the test
    gpus_seen(0)
    assert dispatch.main(["--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"{PROG}: error: needs a GPU, found 0\n"


def test_the_report_names_trees_by_index():
    row = {"tree": "/a", "tokens": 128, "protocol": "count-first", "capacity": 4096}
    row |= {"us": 7.5, "floor_us": 2.25, "bitwise": False}
    row |= {"written_bytes": 3 * 2**19, "nvlink_write_bound_us": 3.5}
    document = {"rank_mode": "1xH200, 2 logical ranks", "trees": {"/a": "ab12"}, "rows": [row]}
    document["notes"] = dispatch.notes(H200)
    lines = dispatch.table_lines(document)
    assert lines[0] == "# attention_route + attention_dispatch, 1xH200, 2 logical ranks"
    assert lines[2] == "- tree `/a`: source digest `ab12`"
    assert lines[6] == "| #0 | count-first | 128 | 4096 | 7.50 | 2.25 | 1.50 | 3.50 | MISMATCH |"
    assert lines[-1].startswith(
        "- each dispatch is attention_route (the epoch's increment, the routes' check and maps) "
        "and attention_dispatch on 24 CTAs;"
    )
    assert lines[-1].endswith(
        "the NVLink write bound is the written bytes at 450 GB/s per direction "
        "(H200 datasheet: 900 GB/s bidirectional)"
    )


def test_an_h100_pcie_run_bounds_its_writes_at_its_nvlink_bridge_s_300_gbps(
    one_gpu_named, monkeypatch, tmp_path
):
    """The whole bench, its GPU work faked: each row's NVLink bound and the
    note are the bridge's 300 GB/s each way, not the H200's 450."""
    one_gpu_named("NVIDIA H100 PCIe")
    written = 2048 * (4096 + 112)

    def measure(tree, tokens, protocol, args, bounds):
        row = {"tree": str(tree), "tokens": tokens, "protocol": str(protocol), "bitwise": True}
        row |= {"capacity": args.capacity, "us": 30.0, "floor_us": 2.0, "written_bytes": written}
        bound_us = dispatch.bound_us(written, bounds.nvlink_gbps_per_direction)
        return row | {"nvlink_write_bound_us": round(bound_us, 2)}

    monkeypatch.setattr(dispatch, "measure", measure)
    argv = ["--tokens", "2048", "--capacity", "2048", "--results-dir", str(tmp_path)]
    assert dispatch.main(argv) == 0
    document = json.loads((tmp_path / "dispatch-1xH100.json").read_text())
    assert document["bounds"]["card"] == "H100 PCIe"
    assert document["bounds"]["nvlink_gbps_per_direction"] == 300
    assert document["rows"][0]["nvlink_write_bound_us"] == 28.73  # 8.2 MiB at 300 GB/s
    report = (tmp_path / "dispatch-1xH100.md").read_text().splitlines()
    assert report[-1].endswith(
        "the NVLink write bound is the written bytes at 300 GB/s per direction "
        "(H100 datasheet, PCIe: NVLink bridge, 600 GB/s bidirectional)"
    )


def test_the_written_bytes_are_a_row_and_its_metadata_per_routed_token():
    """Padding rows and a token routed nowhere send nothing; a token routed to
    several experts of the one FFN rank sends one row; count-first adds its
    slot's flag."""
    g = dispatch.geometry(8)
    routes = torch.full((8, 8), -1, dtype=torch.int64)
    routes[0, :3] = torch.tensor([4, 9, 70])
    routes[2, 0] = 5
    routes[6, 0] = 1  # past num_tokens: padding, never sent
    assert (g.row_bytes, g.slot_meta_bytes) == (4096, 112)
    assert dispatch.written_bytes(routes, 4, g, Protocol.PAYLOAD_FIRST) == 2 * (4096 + 112)
    assert dispatch.written_bytes(routes, 4, g, Protocol.COUNT_FIRST) == 2 * (4096 + 112 + 8)


@pytest.mark.parametrize("top_k", [1, 3, 8, 12, 32])
@pytest.mark.parametrize(
    "count_first, arm_attention", [(False, False), (True, False), (True, True)]
)
def test_every_attention_dispatch_top_k_compiles(top_k, count_first, arm_attention):
    spec = KernelSpec.make(
        "attention_dispatch",
        kHidden=2048,
        kTopK=top_k,
        kFp8=False,
        kCountFirst=count_first,
        kArmAttention=arm_attention,
        kNumThreads=512,
    )
    assert compile_kernel(spec).cubin[:4] == b"\x7fELF"
