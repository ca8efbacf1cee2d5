"""invariants.data.layout: the checkers accept the reference and reject each corruption."""

import dataclasses

import pytest
import torch

from invariants.data.inputs import make_source_inputs
from invariants.data.layout import (
    LayoutError,
    bitwise_equal,
    check_collect_view,
    check_expert_layout,
    first_mismatch,
)
from invariants.data.reference import dispatch_reference

E, F = 8, 2


def make_case(payload="bf16"):
    sources = [
        make_source_inputs(
            rank=a,
            step=0,
            seed=5,
            capacity=24,
            hidden=256,
            top_k=4,
            num_experts=E,
            num_tokens=20 - a,
            payload=payload,
        )
        for a in range(2)
    ]
    return sources, dispatch_reference(sources, E, F)


@pytest.fixture(scope="module")
def case():
    return make_case()


def edited(obj, *names):
    """A copy whose named tensors are cloned, ready to be corrupted in place."""
    return dataclasses.replace(obj, **{name: getattr(obj, name).clone() for name in names})


def layout_error(layout, sources, f=0, **kwargs):
    with pytest.raises(LayoutError) as info:
        check_expert_layout(layout, sources, f, E, F, **kwargs)
    return str(info.value)


def view_error(view, layout, sources, f=0):
    with pytest.raises(LayoutError) as info:
        check_collect_view(view, layout, sources, f, E, F)
    return str(info.value)


def same_expert_rows(layout):
    """Two adjacent rows of the first local expert that has at least two."""
    offsets = layout.expert_offsets.tolist()
    j = next(j for j in range(len(offsets) - 1) if offsets[j + 1] - offsets[j] >= 2)
    return offsets[j], offsets[j] + 1


@pytest.mark.parametrize("payload", ["bf16", "fp8"])
def test_reference_passes(payload):
    sources, dispatched = make_case(payload)
    for f, (layout, view) in enumerate(dispatched):
        check_expert_layout(layout, sources, f, E, F)
        check_expert_layout(layout, sources, f, E, F, with_rows=False)
        check_collect_view(view, layout, sources, f, E, F)


def test_longer_buffers_are_accepted(case):
    sources, dispatched = case
    layout, _ = dispatched[1]
    junk = {
        name: torch.cat([getattr(layout, name), getattr(layout, name)[:3]])
        for name in ("x", "src_rank", "src_token", "topk_slot", "weight", "collect_row")
    }
    check_expert_layout(dataclasses.replace(layout, **junk), sources, 1, E, F)


def test_one_flipped_bit_in_a_row(case):
    sources, dispatched = case
    layout = edited(dispatched[0][0], "x")
    layout.x.view(torch.int16)[3, 17] ^= 1
    message = layout_error(layout, sources)
    assert "x differs from the source row" in message and "row=3" in message
    assert "col=17" in message
    check_expert_layout(layout, sources, 0, E, F, with_rows=False)  # rows not checked


def test_swapped_row_payloads(case):
    sources, dispatched = case
    layout = edited(dispatched[0][0], "x")
    layout.x[[0, 1]] = layout.x[[1, 0]]
    assert "x differs from the source row: ffn_local=0 row=0" in layout_error(layout, sources)


def test_swapped_whole_rows(case):
    sources, dispatched = case
    fields = ("x", "src_rank", "src_token", "topk_slot", "weight")
    layout = edited(dispatched[0][0], *fields)
    r0, r1 = same_expert_rows(layout)
    for name in fields:
        tensor = getattr(layout, name)
        tensor[[r0, r1]] = tensor[[r1, r0]]
    assert "rows out of (j, a, t) order" in layout_error(layout, sources)


def test_pair_stored_twice(case):
    sources, dispatched = case
    fields = ("x", "src_rank", "src_token", "topk_slot", "weight")
    layout = edited(dispatched[0][0], *fields)
    r0, r1 = same_expert_rows(layout)
    for name in fields:
        getattr(layout, name)[r1] = getattr(layout, name)[r0]
    assert "a pair appears twice" in layout_error(layout, sources)


def test_off_by_one_offset(case):
    sources, dispatched = case
    layout = edited(dispatched[0][0], "expert_offsets")
    layout.expert_offsets[2] += 1
    message = layout_error(layout, sources)
    assert "prefix sums" in message and "j=1" in message
    layout.expert_offsets[2] -= 1
    layout.expert_offsets[0] = 1
    assert "start at 0" in layout_error(layout, sources)


def test_offsets_dtype_and_shape(case):
    sources, dispatched = case
    layout = dispatched[0][0]
    wrong = dataclasses.replace(layout, expert_offsets=layout.expert_offsets.long())
    assert "int32" in layout_error(wrong, sources)
    wrong = dataclasses.replace(layout, expert_offsets=layout.expert_offsets[:-1])
    assert "expert_offsets must be int32" in layout_error(wrong, sources)


def test_wrong_src_token(case):
    sources, dispatched = case
    layout = edited(dispatched[0][0], "src_token")
    a, t, k = (int(v[2]) for v in (layout.src_rank, layout.src_token, layout.topk_slot))
    expert = int(sources[a].topk_idx[t, k])
    other = next(
        u for u in range(sources[a].num_tokens) if int(sources[a].topk_idx[u, k]) != expert
    )
    layout.src_token[2] = other
    message = layout_error(layout, sources)
    assert "does not point back" in message and f"row=2 src_rank={a} src_token={other}" in message
    layout.src_token[2] = sources[a].num_tokens  # a padding token
    assert "src_token must be < num_tokens" in layout_error(layout, sources)


def test_wrong_src_rank_and_weight(case):
    sources, dispatched = case
    layout = edited(dispatched[1][0], "src_rank", "weight")
    layout.weight.view(torch.int32)[4] ^= 1
    assert "weight differs from topk_weights: ffn_local=1 row=4" in layout_error(
        layout, sources, f=1
    )
    layout.src_rank[0] = 2
    assert "out of range" in layout_error(layout, sources, f=1)


def test_fp8_scales_checked():
    sources, dispatched = make_case("fp8")
    layout = edited(dispatched[0][0], "x_scales")
    layout.x_scales[1, 1] *= 2
    assert "x_scales differs" in layout_error(layout, sources)
    assert "x_scales missing" in layout_error(dataclasses.replace(layout, x_scales=None), sources)


def test_collect_rows_out_of_order(case):
    sources, dispatched = case
    layout, view = dispatched[0]
    fields = ("x", "src_rank", "src_token", "local_experts", "weights", "expert_rows")
    view = edited(view, *fields)
    for name in fields:
        tensor = getattr(view, name)
        tensor[[0, 1]] = tensor[[1, 0]]
    message = view_error(view, layout, sources)
    assert "(a, t) in order" in message and "row=0" in message


def test_collect_missing_row(case):
    sources, dispatched = case
    layout, view = dispatched[0]
    short = dataclasses.replace(view, src_rank=view.src_rank[:-1])
    assert "src_rank must be torch.int32 [>= " in view_error(short, layout, sources)
    narrow = dataclasses.replace(view, local_experts=view.local_experts[:, :-1])
    assert "local_experts must be torch.int32 [>= " in view_error(narrow, layout, sources)


def test_collect_row_payload(case):
    sources, dispatched = case
    layout, view = dispatched[1]
    view = edited(view, "x")
    view.x.view(torch.int16)[5, 0] ^= 0x100
    assert "collect x differs" in view_error(view, layout, sources, f=1)


def test_collect_slot_fields(case):
    sources, dispatched = case
    layout, view = dispatched[0]
    c, k = (int(v) for v in (view.local_experts == -1).nonzero()[0])
    wrong = edited(view, "local_experts")
    wrong.local_experts[c, k] = 0
    assert f"local_experts wrong: ffn_local=0 row={c} slot={k}" in view_error(
        wrong, layout, sources
    )
    wrong = edited(view, "weights")
    wrong.weights[c, k] = -0.0  # the contract says +0
    assert f"weights wrong: ffn_local=0 row={c} slot={k}" in view_error(wrong, layout, sources)
    wrong = edited(view, "expert_rows")
    wrong.expert_rows[c, k] = 0
    assert "expert_rows" in view_error(wrong, layout, sources)


def test_collect_expert_rows_and_collect_row(case):
    sources, dispatched = case
    layout, view = dispatched[0]
    c, k = (int(v) for v in (view.expert_rows >= 0).nonzero()[0])
    wrong = edited(view, "expert_rows")
    wrong.expert_rows[c, k] += 1
    assert f"row={c} slot={k}" in view_error(wrong, layout, sources)
    bad_layout = edited(layout, "collect_row")
    bad_layout.collect_row[0] += 1
    assert "collect_row is not the inverse of expert_rows: ffn_local=0 row=0" in view_error(
        view, bad_layout, sources
    )


def test_bitwise_equal():
    assert bitwise_equal(torch.tensor([1.0, -0.0]), torch.tensor([1.0, -0.0]))
    assert not bitwise_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
    nan = torch.tensor([float("nan")])
    assert bitwise_equal(nan, nan.clone())
    assert not bitwise_equal(torch.zeros(2), torch.zeros(3))
    assert not bitwise_equal(torch.zeros(2), torch.zeros(2, dtype=torch.float64))
    fp8 = torch.tensor([1.0, 2.0]).to(torch.float8_e4m3fn)
    assert bitwise_equal(fp8, fp8.clone())
    assert not bitwise_equal(fp8, torch.tensor([1.0, 3.0]).to(torch.float8_e4m3fn))
    assert bitwise_equal(torch.tensor([True]), torch.tensor([True]))


def test_first_mismatch():
    a = torch.zeros(3, 4, dtype=torch.bfloat16)
    assert first_mismatch(a, a.clone()) is None
    b = a.clone()
    b[1, 2] = 1.5
    b[2, 0] = -0.0
    message = first_mismatch(a, b)
    assert message.startswith("2 elements differ, first at row=1 col=2: a=0.0 b=1.5")
    assert "bits a=0x0000 b=0x3fc0" in message
    assert "shape/dtype differ" in first_mismatch(a, a.float())
    assert "row=0 col=1" in first_mismatch(
        torch.tensor([1, 2]).reshape(1, 2), torch.tensor([1, 3]).reshape(1, 2)
    )
