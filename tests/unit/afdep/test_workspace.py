from __future__ import annotations

import pytest

from afdep.workspace import MAX_SHARED_BYTES, Geometry, pack_params, symmetric_layout

BASE = dict(world_size=2, ffn_ranks=1, num_experts=128, capacity=2048, hidden=2048, top_k=8)


def geometry(**changes) -> Geometry:
    return Geometry(**{**BASE, **changes})


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"world_size": 1}, "world_size=1 is too small for ffn_ranks=1"),
        ({"world_size": 3, "ffn_ranks": 3}, "world_size=3 is too small for ffn_ranks=3"),
        (
            {"num_experts": 100, "ffn_ranks": 3, "world_size": 4},
            "num_experts=100 is not divisible by ffn_ranks=3",
        ),
        ({"payload": "fp8", "hidden": 2000}, "hidden=2000 must be a multiple of 128 for fp8"),
        ({"hidden": 2044}, "hidden=2044 must be a multiple of 8"),
        ({"payload": "fp16"}, "payload must be one of"),
        ({"top_k": 33, "num_experts": 64}, "top_k=33 must be <= min"),
        ({"capacity": 0}, "capacity must be a positive int"),
        ({"num_sms": True}, "num_sms must be a positive int"),
        ({"world_size": 40, "ffn_ranks": 1}, "world_size=40 exceeds 32"),
        ({"capacity": 65536, "num_experts": 256}, "capacity=65536 with num_experts=256 needs"),
    ],
)
def test_bad_geometry_names_the_argument(changes, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        geometry(**changes)


def test_row_geometry():
    assert geometry().row_bytes == 4096 and geometry().num_scales == 0
    fp8 = geometry(payload="fp8", hidden=7168)
    assert fp8.payload_bytes == 7168 and fp8.num_scales == 56 and fp8.row_bytes == 7168 + 224
    assert geometry().slot_meta_bytes == 112 and geometry(top_k=1).slot_meta_bytes == 32
    assert geometry().max_rows == 2048 * 8
    assert geometry(world_size=4, ffn_ranks=2).max_rows == 2 * 2048 * 8
    assert geometry().dispatch_smem_bytes <= MAX_SHARED_BYTES


def test_symmetric_regions_are_aligned_and_disjoint():
    for g in (
        geometry(world_size=4, ffn_ranks=2, payload="fp8"),
        geometry(arm_attention=True, collect_view=True),
    ):
        layout = symmetric_layout(g)
        regions = [(v, k) for k, v in layout.items() if k.startswith("off_")]
        assert [v for v, _ in regions] == sorted(v for v, _ in regions)
        assert all(offset % 256 == 0 for offset, _ in regions)
        assert layout["total_bytes"] >= layout["off_direct_scales"]
    plain, direct = symmetric_layout(geometry()), symmetric_layout(geometry(arm_attention=True))
    assert plain["off_direct_scales"] == plain["off_direct_x"]  # no ARM=attention rows
    assert direct["off_direct_scales"] - direct["off_direct_x"] >= geometry().max_rows * 4096
    rows_end = plain["off_slot_rows"] + 2048 * geometry().row_bytes
    assert rows_end <= plain["off_combine_flags"]


def test_pack_params_needs_every_field():
    with pytest.raises(ValueError, match="missing"):
        pack_params({"rank": 0})
