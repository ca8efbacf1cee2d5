"""The NCCL pipeline the bench compares against does afdep's job bit for bit:
its pieces against the reference, and whole round trips over gloo on the CPU
(1A:1F and 2A:2F), each source's output equal to combine_reference's."""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from invariants.data.inputs import make_source_inputs
from invariants.data.reference import combine_reference, dispatch_reference
from tools.bench.pipeline import ffn_expand, ffn_partials, pipeline_step, source_pack

EXPERTS, HIDDEN, TOP_K, CAPACITY = 16, 256, 4, 64


def sources(attention: int, tokens: int) -> list:
    return [
        make_source_inputs(
            rank=a, step=1, seed=7, capacity=CAPACITY, hidden=HIDDEN, top_k=TOP_K,
            num_experts=EXPERTS, num_tokens=tokens, payload="bf16",
        )
        for a in range(attention)
    ]  # fmt: skip


def test_the_expansion_is_the_reference_layout_and_the_partials_its_combine():
    inputs = sources(2, 40)
    ((layout, _),) = dispatch_reference(inputs, EXPERTS, 1)
    packs = [
        source_pack(s.x[:40], s.topk_idx[:40], s.topk_weights[:40], 1, EXPERTS) for s in inputs
    ]
    rows = torch.cat([p.rows for p in packs])
    routes = torch.cat([p.routes for p in packs])
    weights = torch.cat([p.weights for p in packs])
    expanded = ffn_expand(rows, routes, 0, EXPERTS)
    rows_out = int(layout.expert_offsets[-1])
    assert torch.equal(expanded.rows, layout.x[:rows_out])
    partial = ffn_partials(expanded.rows, expanded, weights)
    expected = combine_reference(inputs, [layout], [layout.x[:rows_out]], EXPERTS, 1)
    first = packs[0].counts[0]
    assert torch.equal(partial[:first], expected[0][packs[0].tokens[0]])


def _round_trip(rank: int, world: int, ffn_ranks: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    attention = world - ffn_ranks
    inputs = sources(attention, 48)
    args = argparse.Namespace(hidden_size=HIDDEN, num_experts=EXPERTS, ffn_ranks=ffn_ranks)
    mine = inputs[rank] if rank < attention else sources(world, 48)[rank]
    result = pipeline_step(mine, args, rank, attention, world)
    if rank < attention:
        layouts = [layout for layout, _ in dispatch_reference(inputs, EXPERTS, ffn_ranks)]
        ys = [layout.x[: int(layout.expert_offsets[-1])] for layout in layouts]
        expected = combine_reference(inputs, layouts, ys, EXPERTS, ffn_ranks)[rank]
        Path(out, f"rank{rank}").write_text(str(torch.equal(result, expected)))
    dist.destroy_process_group()


@pytest.mark.parametrize("world, ffn_ranks", [(2, 1), (4, 2)])
def test_a_round_trip_over_gloo_is_bitwise_the_reference(tmp_path, world, ffn_ranks):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(_round_trip, args=(world, ffn_ranks, port, str(tmp_path)), nprocs=world)
    attention = world - ffn_ranks
    assert [Path(tmp_path, f"rank{a}").read_text() for a in range(attention)] == [
        "True"
    ] * attention
