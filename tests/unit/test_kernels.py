"""Which kernels each role launches, per protocol (no GPU needed)."""

from __future__ import annotations

from afdep.kernels import COUNT_FIRST, PAYLOAD_FIRST, combine_launch, dispatch_launches
from afdep.workspace import Geometry

G = Geometry(world_size=2, ffn_ranks=1, num_experts=128, capacity=2048, hidden=2048, top_k=8)


def names(launches):
    return [(launch.spec.name, launch.grid, launch.programmatic) for launch in launches]


def test_payload_first_launches():
    assert names(dispatch_launches(G, "attention", PAYLOAD_FIRST)) == [
        ("source_dispatch", 24, False)
    ]
    assert names(dispatch_launches(G, "ffn", PAYLOAD_FIRST)) == [("copy_epilogue", 24, False)]
    assert (
        dict(dispatch_launches(G, "attention", PAYLOAD_FIRST)[0].spec.template)["kCountFirst"]
        is False
    )


def test_count_first_launches_the_epilogue_programmatically():
    assert names(dispatch_launches(G, "ffn", COUNT_FIRST, epilogue_sms=48)) == [
        ("ffn_stream_dispatch", 1, False),
        ("ffn_stream_epilogue", 48, True),
    ]
    source = Geometry(**{**G.__dict__, "arm_source": True})
    spec = dispatch_launches(source, "attention", COUNT_FIRST)[0].spec
    assert dict(spec.template)["kArmSource"] is True and dict(spec.template)["kCountFirst"]
    assert dispatch_launches(source, "attention", PAYLOAD_FIRST)[0].spec.template[4] == (
        "kArmSource",
        False,
    )


def test_combine_launches():
    assert combine_launch(G, "attention").spec.name == "source_combine"
    assert combine_launch(G, "ffn").spec.name == "ffn_combine"
