"""invariants.data.reference: a hand-computed example, the combine rounding rules, and
conservation of every routed pair on random inputs."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from invariants.data.inputs import SourceInputs, quantize_fp8
from invariants.data.layout import bitwise_equal, check_collect_view, check_expert_layout
from invariants.data.reference import (
    apply_experts,
    combine_reference,
    dispatch_reference,
    expert_function,
    expert_scale,
)
from invariants.data.strategies import valid_routes

H = 128
BF16 = torch.bfloat16


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


def f32(values):
    return torch.tensor(values, dtype=torch.float32)


def rows_of(values, dtype=BF16):
    """[len(values), H]: row i filled with values[i]."""
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1).expand(-1, H).to(dtype)


def hand_sources():
    # 2 attention ranks, 4 experts on 2 FFN ranks (experts 0,1 | 2,3), K = 2.
    src0 = SourceInputs(
        x=rows_of([1, 2, 3]),
        x_scales=None,
        topk_idx=torch.tensor([[1, 2], [3, -1], [-1, -1]]),
        topk_weights=f32([[0.5, 0.25], [0.75, 0.125], [0.5, 0.5]]),
        num_tokens=2,
    )
    src1 = SourceInputs(
        x=rows_of([11, 12]),
        x_scales=None,
        topk_idx=torch.tensor([[0, 1], [2, 0]]),
        topk_weights=f32([[0.5, 0.5], [0.25, 1.0]]),
        num_tokens=2,
    )
    return [src0, src1]


def assert_bits(got, expected):
    assert bitwise_equal(got, expected), f"{got=} {expected=}"


def test_expert_scale():
    assert [expert_scale(e) for e in (0, 1, 7, 8, 13)] == [0.5, 0.75, 2.25, 0.5, 1.75]
    assert torch.equal(expert_scale(torch.tensor([0, 3, 9])), f32([0.5, 1.25, 0.75]))


def test_expert_function_bf16_and_fp8():
    y = expert_function(rows_of([3, -2]), None, torch.tensor([5, 2]))
    assert_bits(y, rows_of([5.25, -2.0]))
    x_fp8 = rows_of([2, 2], torch.float8_e4m3fn)
    scales = f32([[0.5], [0.25]])
    y = expert_function(x_fp8, scales, torch.tensor([3, 0]))
    assert_bits(y, rows_of([1.25, 0.25]))


def test_hand_dispatch_ffn0():
    sources = hand_sources()
    layout, view = dispatch_reference(sources, 4, 2)[0]
    # Rows by (j, a, t): expert 0 <- (1,0,k0), (1,1,k1); expert 1 <- (0,0,k0), (1,0,k1).
    assert_bits(layout.x, rows_of([11, 12, 1, 11]))
    assert layout.x_scales is None
    assert_bits(layout.src_rank, i32([1, 1, 0, 1]))
    assert_bits(layout.src_token, i32([0, 1, 0, 0]))
    assert_bits(layout.topk_slot, i32([0, 1, 0, 1]))
    assert_bits(layout.weight, f32([0.5, 1.0, 0.5, 0.5]))
    assert_bits(layout.expert_offsets, i32([0, 2, 4]))
    assert_bits(layout.collect_row, i32([1, 2, 0, 1]))
    # Collect rows (0,0), (1,0), (1,1).
    assert_bits(view.x, rows_of([1, 11, 12]))
    assert_bits(view.src_rank, i32([0, 1, 1]))
    assert_bits(view.src_token, i32([0, 0, 1]))
    assert_bits(view.local_experts, i32([[1, -1], [0, 1], [-1, 0]]))
    assert_bits(view.weights, f32([[0.5, 0.0], [0.5, 0.5], [0.0, 1.0]]))
    assert_bits(view.expert_rows, i32([[2, -1], [0, 3], [-1, 1]]))


def test_hand_dispatch_ffn1():
    sources = hand_sources()
    layout, view = dispatch_reference(sources, 4, 2)[1]
    # expert 2 <- (0,0,k1), (1,1,k0); expert 3 <- (0,1,k0).
    assert_bits(layout.x, rows_of([1, 12, 2]))
    assert_bits(layout.src_rank, i32([0, 1, 0]))
    assert_bits(layout.src_token, i32([0, 1, 1]))
    assert_bits(layout.topk_slot, i32([1, 0, 0]))
    assert_bits(layout.weight, f32([0.25, 0.25, 0.75]))
    assert_bits(layout.expert_offsets, i32([0, 2, 3]))
    assert_bits(layout.collect_row, i32([0, 2, 1]))
    assert_bits(view.x, rows_of([1, 2, 12]))
    assert_bits(view.src_rank, i32([0, 0, 1]))
    assert_bits(view.src_token, i32([0, 1, 1]))
    assert_bits(view.local_experts, i32([[-1, 0], [1, -1], [0, -1]]))
    assert_bits(view.weights, f32([[0.0, 0.25], [0.75, 0.0], [0.25, 0.0]]))
    assert_bits(view.expert_rows, i32([[-1, 0], [2, -1], [1, -1]]))


def test_hand_combine():
    sources = hand_sources()
    dispatched = dispatch_reference(sources, 4, 2)
    layouts = [layout for layout, _ in dispatched]
    ys = [apply_experts(layout, f, 4, 2) for f, layout in enumerate(layouts)]
    # s(0..3) = 0.5, 0.75, 1.0, 1.25.
    assert_bits(ys[0], rows_of([5.5, 6.0, 0.75, 8.25]))
    assert_bits(ys[1], rows_of([1.0, 12.0, 2.5]))
    out0, out1 = combine_reference(sources, layouts, ys, 4, 2)
    # (0,0): 0.5*0.75 + 0.25*1.0; (0,1): 0.75*2.5; padding row 2 is not produced.
    assert_bits(out0, rows_of([0.625, 1.875]))
    # (1,0): 0.5*5.5 + 0.5*8.25 on FFN 0; (1,1): 1.0*6 (FFN 0) + 0.25*12 (FFN 1).
    assert_bits(out1, rows_of([6.875, 9.0]))


def one_rank(topk, weights, hidden=H):
    n = len(topk)
    return [
        SourceInputs(torch.zeros(n, hidden, dtype=BF16), None, torch.tensor(topk), f32(weights), n)
    ]


def test_combine_rounds_each_ffn_partial_to_bf16():
    # Token 0: FFN 0 partial 1 + 2^-8 rounds (tie, to even) to 1.0 in bf16, FFN 1 adds
    # 2^-8: the sum 1 + 2^-8 rounds to 1.0 again. A single rounding would give 1 + 2^-7.
    # Token 1: routes nowhere and gets +0. Token 2: only FFN 1, 3 * 0.5.
    sources = one_rank([[0, 1], [-1, -1], [1, -1]], [[1 + 2**-8, 2**-8], [0.5, 0.5], [0.5, 0.5]])
    layouts = [layout for layout, _ in dispatch_reference(sources, 2, 2)]
    ys = [rows_of([1.0]), rows_of([1.0, 3.0])]
    (out,) = combine_reference(sources, layouts, ys, 2, 2)
    assert_bits(out, rows_of([1.0, 0.0, 1.5]))


def test_combine_sign_of_zero():
    # The only partial of token 0 is 0.25 * -2^-133 = -2^-135 in fp32, which rounds to
    # -0.0 in bf16; the attention side adds it to acc = +0.0 and gets +0.0.
    tiny = -(2.0**-133)  # the smallest bf16 subnormal, negated
    partial = torch.tensor(0.25 * tiny, dtype=torch.float32).to(BF16)
    assert partial.view(torch.int16).item() == -0x8000  # -0.0
    sources = one_rank([[0, -1], [1, -1]], [[0.25, 0.5], [0.25, 0.5]])
    layouts = [layout for layout, _ in dispatch_reference(sources, 2, 2)]
    ys = [rows_of([tiny]), rows_of([tiny])]
    (out,) = combine_reference(sources, layouts, ys, 2, 2)
    assert_bits(out, torch.zeros(2, H, dtype=BF16))
    assert bool((out.view(torch.int16) == 0).all())  # +0.0, not -0.0


def test_combine_skipped_slots_contribute_nothing():
    # Slot 1 is on FFN 1; FFN 0's partial must not see FFN 1's NaN row.
    sources = one_rank([[0, 1]], [[0.5, 0.5]])
    layouts = [layout for layout, _ in dispatch_reference(sources, 2, 2)]
    ys = [rows_of([2.0]), rows_of([float("nan")])]
    (out,) = combine_reference(sources, layouts, ys, 2, 2)
    assert bool(out.isnan().all())  # NaN arrives only through FFN 1's own partial
    ys = [rows_of([2.0]), rows_of([-0.0])]
    (out,) = combine_reference(sources, layouts, ys, 2, 2)
    assert_bits(out, rows_of([1.0]))


def slow_combine(sources, layouts, ys, epf):
    """Per-token Python loops over the same rule, for cross-checking the indexing."""
    outs = []
    for a, src in enumerate(sources):
        out = torch.zeros(src.num_tokens, src.x.shape[1], dtype=BF16)
        for t in range(src.num_tokens):
            acc = torch.zeros(src.x.shape[1])
            for f, layout in enumerate(layouts):
                slots = [
                    k for k, e in enumerate(src.topk_idx[t].tolist()) if e >= 0 and e // epf == f
                ]
                if not slots:
                    continue
                p = torch.zeros(src.x.shape[1])
                for k in slots:
                    r = next(
                        r
                        for r in range(layout.src_rank.numel())
                        if (
                            int(layout.src_rank[r]),
                            int(layout.src_token[r]),
                            int(layout.topk_slot[r]),
                        )
                        == (a, t, k)
                    )
                    p = p + src.topk_weights[t, k] * ys[f][r].float()
                acc = acc + p.to(BF16).float()
            out[t] = acc.to(BF16)
        outs.append(out)
    return outs


@st.composite
def random_sources(draw, max_capacity=48):
    ffn_ranks = draw(st.sampled_from([1, 2, 4]))
    num_experts = ffn_ranks * draw(st.integers(1, 4))
    top_k = draw(st.integers(1, min(8, num_experts)))
    payload = draw(st.sampled_from(["bf16", "fp8"]))
    hidden = draw(st.sampled_from([128, 256]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    sources = []
    for _ in range(draw(st.integers(1, 3))):
        topk, _, n = draw(
            valid_routes(top_k=top_k, num_experts=num_experts, max_capacity=max_capacity)
        )
        capacity = topk.shape[0]
        x = torch.randn(capacity, hidden, generator=gen)
        weights = torch.rand(capacity, top_k, generator=gen)
        if payload == "bf16":
            sources.append(SourceInputs(x.to(BF16), None, topk, weights, n))
        else:
            sources.append(SourceInputs(*quantize_fp8(x), topk, weights, n))
    return sources, num_experts, ffn_ranks


@settings()
@given(random_sources())
def test_reference_conserves_every_pair(case):
    sources, num_experts, ffn_ranks = case
    dispatched = dispatch_reference(sources, num_experts, ffn_ranks)
    assert len(dispatched) == ffn_ranks
    total = 0
    for f, (layout, view) in enumerate(dispatched):
        check_expert_layout(layout, sources, f, num_experts, ffn_ranks)
        check_collect_view(view, layout, sources, f, num_experts, ffn_ranks)
        total += int(layout.expert_offsets[-1])
    assert total == sum(int((s.topk_idx[: s.num_tokens] >= 0).sum()) for s in sources)


@settings()
@given(random_sources(max_capacity=6))
def test_combine_matches_per_token_loops(case):
    sources, num_experts, ffn_ranks = case
    layouts = [layout for layout, _ in dispatch_reference(sources, num_experts, ffn_ranks)]
    ys = [apply_experts(layout, f, num_experts, ffn_ranks) for f, layout in enumerate(layouts)]
    outs = combine_reference(sources, layouts, ys, num_experts, ffn_ranks)
    expected = slow_combine(sources, layouts, ys, num_experts // ffn_ranks)
    for a, (got, want) in enumerate(zip(outs, expected, strict=True)):
        assert bitwise_equal(got, want), a


def test_dispatch_is_deterministic():
    sources = hand_sources()
    first = dispatch_reference(sources, 4, 2)
    second = dispatch_reference(sources, 4, 2)
    for (l1, v1), (l2, v2) in zip(first, second, strict=True):
        for name in (
            "x",
            "src_rank",
            "src_token",
            "topk_slot",
            "weight",
            "expert_offsets",
            "collect_row",
        ):
            assert bitwise_equal(getattr(l1, name), getattr(l2, name)), name
        assert bitwise_equal(v1.expert_rows, v2.expert_rows)
