"""Host-side checks of dispatch/combine inputs: ValueError naming the argument."""

from __future__ import annotations

import pytest
import torch

from afdep.buffer import Buffer
from afdep.config import Settings
from afdep.step_inputs import check_expert_outputs, check_source_inputs, step_bucket
from afdep.vocab import Protocol
from afdep.workspace import Geometry

CPU = torch.device("cpu")
G = Geometry(world_size=2, ffn_ranks=1, num_experts=16, capacity=8, hidden=256, top_k=2)
G8 = Geometry(
    world_size=2, ffn_ranks=1, num_experts=16, capacity=8, hidden=256, top_k=2, payload="fp8"
)


def inputs(**changes):
    base = {
        "x": torch.zeros(8, 256, dtype=torch.bfloat16),
        "topk_idx": torch.full((8, 2), -1, dtype=torch.int64),
        "topk_weights": torch.zeros(8, 2),
        "num_tokens": 4,
        "x_scales": None,
    }
    return {**base, **changes}


def test_valid_inputs_pass():
    check_source_inputs(G, CPU, **inputs())
    check_source_inputs(G, CPU, **inputs(num_tokens=torch.zeros(1, dtype=torch.int32)))
    check_source_inputs(
        G8,
        CPU,
        **inputs(x=torch.zeros(8, 256, dtype=torch.float8_e4m3fn), x_scales=torch.zeros(8, 2)),
    )


@pytest.mark.parametrize(
    "geometry, changes, message",
    [
        (G, {"x": torch.zeros(8, 256)}, "x must be torch.bfloat16, got torch.float32"),
        (G, {"x": torch.zeros(8, 128, dtype=torch.bfloat16)}, r"x must have shape \[8, 256\]"),
        (G, {"x": torch.zeros(256, 8, dtype=torch.bfloat16).t()}, "x must be contiguous"),
        (G, {"x": "x"}, "x must be a tensor, got str"),
        (G, {"topk_idx": torch.zeros(8, 2, dtype=torch.int32)}, "topk_idx must be torch.int64"),
        (G, {"topk_idx": torch.zeros(8, 3, dtype=torch.int64)}, r"topk_idx must have shape"),
        (G, {"topk_weights": torch.zeros(8, 2, dtype=torch.float64)}, "topk_weights must be"),
        (G, {"num_tokens": 9}, r"num_tokens=9 must lie in \[0, capacity=8\]"),
        (G, {"num_tokens": -1}, r"num_tokens=-1 must lie in"),
        (G, {"num_tokens": 2.0}, "num_tokens must be an int or an int32 tensor"),
        (G, {"num_tokens": torch.zeros(1, dtype=torch.int64)}, "num_tokens must be torch.int32"),
        (G, {"x_scales": torch.zeros(8, 2)}, "x_scales is only for fp8 payloads"),
        (G8, {"x": torch.zeros(8, 256, dtype=torch.float8_e4m3fn)}, "x_scales must be a tensor"),
        (G8, {"x_scales": torch.zeros(8, 2)}, "x must be torch.float8_e4m3fn"),
    ],
)
def test_bad_input_names_the_argument(geometry, changes, message):
    with pytest.raises(ValueError, match=message):
        check_source_inputs(geometry, CPU, **inputs(**changes))


def test_wrong_device_is_named():
    with pytest.raises(ValueError, match="x must be on cuda:0, got cpu"):
        check_source_inputs(G, torch.device("cuda", 0), **inputs())


def test_expert_outputs():
    check_expert_outputs(G, CPU, torch.zeros(5, 256, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"y must have shape \[rows, 256\], got \[5, 128\]"):
        check_expert_outputs(G, CPU, torch.zeros(5, 128, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="y must be torch.bfloat16"):
        check_expert_outputs(G, CPU, torch.zeros(5, 256))


def test_every_rank_reads_a_bucket_the_same_way():
    # An empty step (bucket 0) is payload-first on the FFN rank too: it once
    # read 0 as "no bucket" and took the capacity's protocol.
    attention, ffn = step_bucket(0, 0, 8), step_bucket(0, None, 8)
    assert attention == ffn == 0
    assert not Settings(min_bucket=1).count_first(ffn)
    assert step_bucket(None, 5, 8) == 5  # an attention rank's int num_tokens
    assert step_bucket(None, torch.zeros(1, dtype=torch.int32), 8) == 8
    assert step_bucket(None, None, 8) == 8  # an FFN rank without count-first


@pytest.mark.parametrize("bucket", [9, -1, 2.0, True])
def test_a_bad_bucket_is_named(bucket):
    with pytest.raises(ValueError, match=rf"bucket={bucket!r} must be an int in \[0, capacity=8\]"):
        step_bucket(bucket, None, 8)


def test_the_protocol_is_an_enum_picked_by_bucket_and_read_back_from_the_log():
    buffer = object.__new__(Buffer)  # no GPU: only the host-side reading
    buffer.config = Settings(min_bucket=512)
    assert (buffer.protocol_for(511), buffer.protocol_for(512)) == (
        Protocol.PAYLOAD_FIRST,
        Protocol.COUNT_FIRST,
    )
    for logged, protocol in ((0, None), (1, Protocol.PAYLOAD_FIRST), (2, Protocol.COUNT_FIRST)):
        buffer._protocol_log = torch.tensor([logged], dtype=torch.int32)
        assert buffer.last_protocol() is protocol
