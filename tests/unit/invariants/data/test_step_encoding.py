"""Stale data is never bitwise-equal to fresh data (docs/synchronization.md, "Stale data
and launch skew"): at the shapes the fault catalog runs, no row, scale row,
weight row, partial or combined output of a step equals one of the step before,
at the same token index or any other."""

from __future__ import annotations

import pytest
import torch

from invariants.data.inputs import (
    PARITY_CHANNELS,
    STEP_BANDS,
    make_source_inputs,
    step_rows,
    step_weights,
)
from invariants.data.reference import (
    apply_experts,
    combine_partials,
    dispatch_reference,
    reduce_partials,
)

# catalogs/afdep.toml's run: --capacity 2048 --hidden-size 2048 --top-k 8
# --num-experts 128 --tokens 8 128 512 --steps 2 (global steps 0..5), seed 0.
EXPERTS = 128
SHAPE = {"capacity": 2048, "hidden": 2048, "top_k": 8, "num_experts": EXPERTS}
CATALOG_TOKENS = [8, 8, 128, 128, 512, 512]


def run_steps(payload: str, attention: int, ffn: int, tokens: list[int]) -> list[dict]:
    """Each step's sources and the reference's partials and outputs."""
    steps = []
    for step, num_tokens in enumerate(tokens):
        sources = [
            make_source_inputs(
                rank=a, step=step, seed=0, num_tokens=num_tokens, payload=payload, **SHAPE
            )
            for a in range(attention)
        ]
        layouts = [layout for layout, _ in dispatch_reference(sources, EXPERTS, ffn)]
        ys = [apply_experts(layout, f, EXPERTS, ffn) for f, layout in enumerate(layouts)]
        partials = combine_partials(sources, layouts, ys, EXPERTS, ffn)
        outs = [reduce_partials(per_ffn) for per_ffn in partials]
        steps.append({"sources": sources, "ys": ys, "partials": partials, "outs": outs})
    return steps


@pytest.fixture(scope="module", params=["bf16", "fp8"])
def catalog_steps(request) -> tuple[str, list[dict]]:
    return request.param, run_steps(request.param, 1, 1, CATALOG_TOKENS)


def as_bits(rows: torch.Tensor) -> torch.Tensor:
    return rows.contiguous().view(torch.uint8).reshape(rows.shape[0], -1)


def rows_of(rows: torch.Tensor) -> set[bytes]:
    return {row.tobytes() for row in as_bits(rows).numpy()}


def assert_no_row_repeats(fresh: torch.Tensor, stale: torch.Tensor, what: str) -> None:
    """Every row of `fresh` differs bitwise from the same row of `stale` and
    from every other row of it."""
    common = min(fresh.shape[0], stale.shape[0])
    same_index = (as_bits(fresh[:common]) == as_bits(stale[:common])).all(dim=1)
    assert not bool(same_index.any()), f"{what}: rows {same_index.nonzero().flatten().tolist()}"
    assert not rows_of(fresh) & rows_of(stale), what


def test_source_rows_scales_and_weights_differ_from_the_steps_before(catalog_steps):
    """From the step before: every row, weight row and scale row. From further
    back: bf16 rows (band and parity: 5 steps), scale rows (band: 2 steps)."""
    payload, steps = catalog_steps
    reach = {"x": 5 if payload == "bf16" else 1, "topk_weights": 1, "x_scales": 2}
    for step in range(1, len(steps)):
        fresh = steps[step]["sources"][0]
        for name, back in reach.items():
            if getattr(fresh, name) is None:
                continue
            for earlier in range(max(step - back, 0), step):
                stale = getattr(steps[earlier]["sources"][0], name)
                where = f"{name} {payload} step {step} vs {earlier}"
                assert_no_row_repeats(getattr(fresh, name), stale, where)


def test_expert_rows_and_outputs_differ_from_every_earlier_step(catalog_steps):
    """The FFN's expert rows and the combined outputs of a step repeat none of
    an earlier step's (bands by step % 3 and the +0 channel by step % 2 make
    six steps distinct); a token that routes nowhere gets no combine data."""
    payload, steps = catalog_steps
    for step in range(1, len(steps)):
        for earlier in range(step):
            where = f"{payload} step {step} vs {earlier}"
            assert_no_row_repeats(steps[step]["ys"][0], steps[earlier]["ys"][0], f"y {where}")
            fresh, stale = steps[step]["partials"][0][0], steps[earlier]["partials"][0][0]
            fresh_routed, stale_routed = fresh[0].squeeze(1), stale[0].squeeze(1)
            fresh_out, stale_out = steps[step]["outs"][0], steps[earlier]["outs"][0]
            assert bool(fresh_routed.any()) and bool(stale_routed.any())
            assert_no_row_repeats(fresh_out[fresh_routed], stale_out[stale_routed], f"out {where}")


def test_one_stale_partial_of_two_changes_the_output():
    """2 attention : 2 FFN ranks (the catalog's 4gpu-f2): an output combined
    from one FFN rank's partial of the step before never equals the fresh one,
    for every token that routes to both FFN ranks at both steps."""
    steps = run_steps("bf16", 2, 2, [128, 128, 512])
    for step in (1, 2):
        for a in range(2):
            fresh, stale = steps[step]["partials"][a], steps[step - 1]["partials"][a]
            n = stale[0][1].shape[0]
            for f in range(2):
                mixed = [(routes[:n], partial[:n]) for routes, partial in fresh]
                mixed[f] = (mixed[f][0], stale[f][1])
                both = fresh[f][0][:n] & stale[f][0]
                got = as_bits(reduce_partials(mixed))[both.squeeze(1)]
                want = as_bits(steps[step]["outs"][a][:n])[both.squeeze(1)]
                assert got.shape[0] > 0
                differs = (got != want).any(dim=1)
                assert bool(differs.all()), f"step {step} a={a} f={f}"


@pytest.mark.parametrize("step", range(6))
def test_step_rows_lie_in_the_steps_band_with_its_zero_channel(step):
    rows = step_rows(16, 384, step, torch.Generator().manual_seed(3))
    band = 2.0 ** STEP_BANDS[step % 3]
    leads = rows[:, ::128].abs()
    assert bool((leads >= band).all()) and bool((leads <= 2 * band).all())
    others = rows.clone()
    others[:, ::128] = 0
    assert bool((others.abs() < band).all())
    zero, kept = PARITY_CHANNELS[step % 2], PARITY_CHANNELS[1 - step % 2]
    assert rows[:, zero].tolist() == [0.0] * 16
    assert not bool(torch.signbit(rows[:, zero]).any())  # +0, not -0
    assert bool((rows[:, kept].abs() >= band / 2).all())


@pytest.mark.parametrize("step", [0, 1])
def test_step_weights_keep_their_range_and_carry_the_parity(step):
    weights = step_weights(4096, 8, step, torch.Generator().manual_seed(5))
    assert weights.min().item() >= 0.05 and weights.max().item() < 1.0
    assert set((weights.view(torch.int32) & 1).flatten().tolist()) == {step}


def test_step_rows_need_three_channels():
    with pytest.raises(ValueError) as info:
        step_rows(4, 2, 0, torch.Generator())
    assert str(info.value) == "hidden must be at least 3 (a lead and two parity channels), got 2"
