"""invariants.data.inputs: fp8 quantization, random routes, per-step inputs and the
graph-static input buffers."""

import inspect
from types import SimpleNamespace

import pytest
import torch

from afdep.buffer import Buffer
from afdep.routes import find_invalid
from afdep.workspace import Geometry
from invariants.data.inputs import (
    graph_inputs,
    load_graph_inputs,
    make_source_inputs,
    quantize_fp8,
    random_routes,
)

FP8_MAX = 448.0


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_quantize_fp8_scales_and_values():
    x = torch.zeros(2, 256)
    x[0, :128] = 2.0
    x[0, 5] = -4.0  # amax of block (0, 0)
    x[0, 128:] = 0.5
    # Row 1 stays zero: its scales come from the 1e-4 floor.
    x_fp8, scales = quantize_fp8(x)
    assert x_fp8.dtype == torch.float8_e4m3fn and x_fp8.shape == (2, 256)
    assert scales.dtype == torch.float32 and scales.shape == (2, 2)
    expected = torch.tensor([[4.0, 0.5], [1e-4, 1e-4]]) / FP8_MAX
    assert torch.equal(scales, expected)
    assert x_fp8[0, 5].float().item() == -FP8_MAX
    assert x_fp8[0, 0].float().item() == 224.0  # 2 / (4 / 448)
    assert torch.equal(x_fp8[0, 128:].float(), torch.full((128,), FP8_MAX))
    assert torch.equal(x_fp8[1].float(), torch.zeros(256))


def test_quantize_fp8_round_trip_is_close():
    x = torch.randn(8, 384, generator=gen(1)) * 3
    x_fp8, scales = quantize_fp8(x)
    scale = scales.repeat_interleave(128, dim=1)
    back = x_fp8.float() * scale
    assert x_fp8.float().abs().max().item() <= FP8_MAX
    # e4m3: half an ulp is 2^-4 relative; subnormals are spaced 2^-9 (times the scale).
    tolerance = x.abs() / 16 + scale / 1024 + 1e-6
    assert bool(((back - x).abs() <= tolerance).all())


def test_quantize_fp8_rejects_bad_shapes():
    with pytest.raises(ValueError, match="x_f32"):
        quantize_fp8(torch.zeros(2, 100))
    with pytest.raises(ValueError, match="x_f32"):
        quantize_fp8(torch.zeros(128))


def test_random_routes_are_valid_and_padded():
    topk = random_routes(40, 64, 16, 4, gen(), empty_prob=0.2)
    assert topk.dtype == torch.int64 and topk.shape == (64, 4)
    assert find_invalid(topk, 16, 40) is None
    assert bool((topk[40:] == -1).all())
    assert bool((topk[:40] == -1).any())  # 0.2 of 160 entries: some are empty


def test_random_routes_without_empties_fill_every_slot():
    topk = random_routes(30, 30, 8, 8, gen(2), empty_prob=0.0)
    # K == E: every real row is a permutation of all experts.
    assert torch.equal(topk.sort(dim=1).values, torch.arange(8).expand(30, 8))


def test_random_routes_all_empty():
    topk = random_routes(5, 6, 8, 3, gen(), empty_prob=1.0)
    assert bool((topk == -1).all())


def test_random_routes_skew():
    topk = random_routes(50, 60, 8, 3, gen(3), empty_prob=0.5, skew=5)
    assert bool((topk[:50, 0] == 5).all())
    assert bool((topk[50:] == -1).all())
    assert find_invalid(topk, 8, 50) is None
    # Skew with K == E keeps each row a permutation.
    full = random_routes(10, 10, 4, 4, gen(4), empty_prob=0.0, skew=2)
    assert bool((full[:, 0] == 2).all())
    assert torch.equal(full.sort(dim=1).values, torch.arange(4).expand(10, 4))


def test_random_routes_is_deterministic_and_shape_driven():
    a = random_routes(10, 16, 8, 2, gen(7))
    b = random_routes(10, 16, 8, 2, gen(7))
    fewer = random_routes(4, 16, 8, 2, gen(7))
    assert torch.equal(a, b)
    # Same stream: the real rows of the shorter batch are a prefix of the longer one.
    assert torch.equal(fewer[:4], a[:4])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((5, 4, 8, 2), "num_tokens"),
        ((2, 4, 2, 3), "top_k"),
    ],
)
def test_random_routes_bad_args(args, match):
    with pytest.raises(ValueError, match=match):
        random_routes(*args, gen())
    with pytest.raises(ValueError, match="skew"):
        random_routes(2, 4, 8, 2, gen(), skew=8)


def inputs(**overrides):
    kwargs = dict(
        rank=0,
        step=0,
        seed=1,
        capacity=32,
        hidden=256,
        top_k=4,
        num_experts=16,
        num_tokens=20,
        payload="bf16",
    )
    kwargs.update(overrides)
    return make_source_inputs(**kwargs)


def test_make_source_inputs_bf16():
    src = inputs()
    assert src.x.dtype == torch.bfloat16 and src.x.shape == (32, 256)
    assert src.x_scales is None
    assert src.topk_idx.shape == (32, 4) and src.topk_weights.shape == (32, 4)
    assert src.topk_weights.dtype == torch.float32
    assert src.num_tokens == 20 and src.capacity == 32 and src.top_k == 4
    assert find_invalid(src.topk_idx, 16, 20) is None
    assert src.topk_weights.min().item() >= 0.05
    assert src.topk_weights.max().item() < 1.0


def test_make_source_inputs_fp8():
    src = inputs(payload="fp8")
    assert src.x.dtype == torch.float8_e4m3fn and src.x.shape == (32, 256)
    assert src.x_scales.dtype == torch.float32 and src.x_scales.shape == (32, 2)


def test_make_source_inputs_is_a_function_of_seed_step_rank():
    base = inputs()
    again = inputs()
    assert torch.equal(base.x.view(torch.int16), again.x.view(torch.int16))
    assert torch.equal(base.topk_idx, again.topk_idx)
    assert torch.equal(base.topk_weights, again.topk_weights)
    for change in ({"rank": 1}, {"step": 1}, {"seed": 2}):
        other = inputs(**change)
        assert not torch.equal(base.x.view(torch.int16), other.x.view(torch.int16)), change


def test_make_source_inputs_options():
    src = inputs(skew=3, empty_prob=0.0)
    assert bool((src.topk_idx[:20, 0] == 3).all())
    assert bool((src.topk_idx[:20] >= 0).all())
    assert inputs(device="cpu").x.device.type == "cpu"
    with pytest.raises(ValueError, match="payload"):
        inputs(payload="fp16")


@pytest.mark.parametrize("payload", ["bf16", "fp8"])
def test_graph_inputs_take_each_step_by_copy(payload):
    shape = dict(capacity=16, hidden=256, top_k=4)
    geometry = Geometry(world_size=2, ffn_ranks=1, num_experts=8, payload=payload, **shape)
    buffers = graph_inputs(geometry, "cpu")
    dispatch_inputs = set(inspect.signature(Buffer.dispatch).parameters) - {
        "self",
        "bucket",
        "skip_send",
    }
    assert set(buffers) == dispatch_inputs
    before = {name: t.data_ptr() for name, t in buffers.items() if t is not None}
    inputs = make_source_inputs(
        rank=0, step=3, seed=7, num_experts=8, num_tokens=11, payload=payload, **shape
    )
    load_graph_inputs(buffers, inputs)
    for name in ("x", "x_scales", "topk_idx", "topk_weights"):
        want = getattr(inputs, name)
        if want is None:
            assert buffers[name] is None
        else:
            assert buffers[name].dtype == want.dtype
            assert torch.equal(buffers[name].view(torch.uint8), want.view(torch.uint8))
    assert buffers["num_tokens"].tolist() == [11]
    assert {name: t.data_ptr() for name, t in buffers.items() if t is not None} == before


def test_graph_inputs_name_a_bad_payload():
    with pytest.raises(ValueError, match="payload must be one of .* got 'fp16'"):
        graph_inputs(SimpleNamespace(capacity=4, hidden=128, top_k=2, payload="fp16"), "cpu")
