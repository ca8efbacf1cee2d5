"""Which kernels each role launches, per protocol (no GPU needed)."""

from __future__ import annotations

from afdep.kernels import combine_launch, dispatch_launches
from afdep.vocab import Protocol, Role
from afdep.workspace import Geometry

ATTENTION, FFN = Role.ATTENTION, Role.FFN
PAYLOAD_FIRST, COUNT_FIRST = Protocol.PAYLOAD_FIRST, Protocol.COUNT_FIRST

G = Geometry(world_size=2, ffn_ranks=1, num_experts=128, capacity=2048, hidden=2048, top_k=8)


def names(launches):
    return [(launch.spec.name, launch.grid, launch.programmatic) for launch in launches]


def test_payload_first_launches():
    # attention_route: a warp per 32 tokens, 16 warps a CTA (2048 / 32 / 16 = 4)
    assert names(dispatch_launches(G, ATTENTION, PAYLOAD_FIRST)) == [
        ("attention_route", 4, False),
        ("attention_dispatch", 24, False),
    ]
    assert names(dispatch_launches(G, FFN, PAYLOAD_FIRST)) == [("ffn_expand", 24, False)]
    # the Buffer's expansion grid (afdep/residency.py expansion_ctas), else num_sms
    assert names(dispatch_launches(G, FFN, PAYLOAD_FIRST, expand_ctas=132)) == [
        ("ffn_expand", 132, False)
    ]
    assert (
        dict(dispatch_launches(G, ATTENTION, PAYLOAD_FIRST)[1].spec.template)["kCountFirst"]
        is False
    )


def test_count_first_launches_the_epilogue_programmatically():
    assert names(dispatch_launches(G, FFN, COUNT_FIRST, expand_ctas=48)) == [
        ("ffn_place", 1, False),
        ("ffn_stream_expand", 48, True),
    ]
    source = Geometry(**{**G.__dict__, "arm_attention": True})
    spec = dispatch_launches(source, ATTENTION, COUNT_FIRST)[1].spec
    assert dict(spec.template)["kArmAttention"] is True and dict(spec.template)["kCountFirst"]
    assert dispatch_launches(source, ATTENTION, PAYLOAD_FIRST)[1].spec.template[4] == (
        "kArmAttention",
        False,
    )


def test_combine_launches():
    assert combine_launch(G, ATTENTION).spec.name == "attention_combine"
    assert combine_launch(G, FFN).spec.name == "ffn_combine"
    # ffn_combine waits on nothing: its own grid (AFDEP_COMBINE_SMS), else num_sms
    assert names([combine_launch(G, FFN, 132), combine_launch(G, ATTENTION, 132)]) == [
        ("ffn_combine", 132, False),
        ("attention_combine", 24, False),
    ]
    assert [combine_launch(G, r).waits for r in (FFN, ATTENTION)] == [False, True]
    assert combine_launch(G, FFN).grid == 24


def test_the_route_kernel_waits_on_nothing_and_holds_a_word_of_every_map_a_warp():
    route = dispatch_launches(G, ATTENTION, COUNT_FIRST)[0]
    assert (route.spec.name, route.waits, route.smem_bytes) == (
        "attention_route",
        False,
        16 * 129 * 4,
    )
    assert dict(route.spec.template) == {"kTopK": 8, "kNumThreads": 512}
    # the maps it writes: 128 experts and 1 FFN rank, 2048 / 32 = 64 words made odd
    assert G.route_map_words == 129 * 65
    assert Geometry(**{**G.__dict__, "capacity": 4096}).route_ctas == 8
    assert Geometry(**{**G.__dict__, "capacity": 33}).route_ctas == 1
