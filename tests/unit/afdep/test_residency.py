"""The one-GPU mode's SM budget: every logical rank's kernels of a step
resident at once, counted before any launch (docs/synchronization.md, "One GPU,
logical ranks")."""

from __future__ import annotations

import pytest

from afdep.jit import KernelSpec
from afdep.kernels import Launch, combine_launch
from afdep.residency import (
    ResidencyError,
    check_residency,
    concurrent_ctas,
    expansion_ctas,
    residency,
)
from afdep.vocab import Protocol, Role
from afdep.workspace import Geometry

PF = (Protocol.PAYLOAD_FIRST,)
BOTH = (Protocol.PAYLOAD_FIRST, Protocol.COUNT_FIRST)
COUNT_FIRST, PAYLOAD_FIRST = Protocol.COUNT_FIRST, Protocol.PAYLOAD_FIRST
SHAPES = {"1A:1F": (2, 1), "2A:1F": (3, 1), "3A:1F": (4, 1), "2A:2F": (4, 2), "1A:3F": (4, 3)}


def geometry(shape: str, num_sms: int = 24) -> Geometry:
    world_size, ffn_ranks = SHAPES[shape]
    return Geometry(
        world_size=world_size,
        ffn_ranks=ffn_ranks,
        num_experts=96,
        capacity=2048,
        hidden=2048,
        top_k=8,
        num_sms=num_sms,
    )


def launch(grid: int, programmatic: bool = False) -> Launch:
    spec = KernelSpec.make("ffn_place", kNumThreads=512)
    return Launch(spec, grid, 0, programmatic)


def test_stream_ordered_launches_hold_the_largest_and_pdl_adds_up():
    assert concurrent_ctas([launch(24), launch(24)]) == 24
    assert concurrent_ctas([launch(1), launch(30, programmatic=True), launch(24)]) == 31
    assert concurrent_ctas([launch(1), launch(20, programmatic=True), launch(24)]) == 24


def test_a_launch_that_waits_on_nothing_counts_as_one_cta():
    spec = KernelSpec.make("ffn_combine", kHidden=2048, kTopK=8, kNumThreads=512)
    combine = Launch(spec, 132, 0, waits=False)
    assert concurrent_ctas([combine]) == 1
    assert concurrent_ctas([launch(24), combine]) == 24
    assert concurrent_ctas([launch(1), combine, launch(30, programmatic=True)]) == 31


def test_the_ffn_combine_on_every_sm_leaves_the_budget_as_it_was():
    g = geometry("3A:1F", 33)
    assert combine_launch(g, Role.FFN, 132).grid == 132
    assert not combine_launch(g, Role.FFN, 132).waits
    assert combine_launch(g, Role.ATTENTION, 132).grid == 33  # attention_combine waits: num_sms
    assert check_residency(g, PF, None, 132).total == 132


@pytest.mark.parametrize(
    "shape, payload_first, both",
    [
        ("1A:1F", 48, 49),
        ("2A:1F", 72, 73),
        ("3A:1F", 96, 97),
        ("2A:2F", 96, 98),
        ("1A:3F", 96, 99),
    ],
)
def test_every_shape_fits_an_h200_at_24_sms(shape, payload_first, both):
    assert check_residency(geometry(shape), PF, None, 132).total == payload_first
    fit = check_residency(geometry(shape), BOTH, None, 132)
    assert (fit.attention_ctas, fit.ffn_ctas, fit.total, fit.fits) == (24, 25, both, True)


def test_count_first_ffn_holds_its_dispatch_and_epilogue_at_once():
    g = geometry("3A:1F")
    assert residency(g, PF, None, 132).ffn_ctas == 24
    assert residency(g, BOTH, None, 132).ffn_ctas == 25  # 1 + 24 (PDL), above the combine's 24
    assert residency(g, BOTH, {COUNT_FIRST: 40}, 132).ffn_ctas == 41
    assert residency(g, PF, {COUNT_FIRST: 40}, 132).ffn_ctas == 24  # count-first's grid only
    assert residency(g, PF, {PAYLOAD_FIRST: 40}, 132).ffn_ctas == 40  # ffn_expand's


def test_a_geometry_that_fits_exactly_is_accepted():
    assert check_residency(geometry("3A:1F", 33), PF, None, 132).total == 132


def test_a_geometry_that_does_not_fit_is_refused_naming_it():
    with pytest.raises(ResidencyError) as caught:
        check_residency(geometry("3A:1F", 40), PF, None, 132)
    assert str(caught.value) == (
        "one-GPU mode: 3A:1F needs 3×40 (attention) + 1×40 (ffn) = 160 CTAs resident at once; "
        "the GPU has 132 SMs: lower --num-sms"
    )


@pytest.mark.parametrize(
    "shape, epilogue",
    [("1A:1F", 107), ("2A:1F", 83), ("3A:1F", 59), ("2A:2F", 41), ("1A:3F", 35)],
)
def test_the_expansion_takes_what_its_gpu_has_left_and_every_shape_still_fits(shape, epilogue):
    """Logical ranks: the SMs the attention ranks leave, split over the FFN
    ranks, less count-first's dispatch CTA (payload-first's ffn_expand has
    none beside it); the knob caps it, never raises it."""
    g = geometry(shape)
    assert expansion_ctas(g, COUNT_FIRST, BOTH, None, 132, shared=True) == epilogue
    assert expansion_ctas(g, PAYLOAD_FIRST, BOTH, None, 132, shared=True) == epilogue + 1
    assert expansion_ctas(g, COUNT_FIRST, BOTH, 32, 132, shared=True) == 32
    assert expansion_ctas(g, PAYLOAD_FIRST, BOTH, 7, 132, shared=True) == 7
    assert expansion_ctas(g, COUNT_FIRST, BOTH, 200, 132, shared=True) == epilogue
    fit = check_residency(g, BOTH, {COUNT_FIRST: epilogue, PAYLOAD_FIRST: epilogue + 1}, 132)
    assert fit.total <= 132 < fit.total + g.ffn_ranks  # no SM left that one more CTA per rank fits


def test_a_rank_per_gpu_leaves_its_expansion_every_sm_but_its_dispatch_cta():
    g = geometry("1A:1F")
    assert expansion_ctas(g, COUNT_FIRST, BOTH, None, 132, shared=False) == 131
    assert expansion_ctas(g, PAYLOAD_FIRST, BOTH, None, 132, shared=False) == 132
    assert expansion_ctas(g, COUNT_FIRST, BOTH, 64, 132, shared=False) == 64


def test_attention_ranks_too_wide_for_the_gpu_are_refused_naming_num_sms():
    g = geometry("3A:1F", 44)  # 3 x 44 = 132: no SM left for the FFN rank
    grids = {p: expansion_ctas(g, p, BOTH, None, 132, shared=True) for p in BOTH}
    assert grids == {COUNT_FIRST: 1, PAYLOAD_FIRST: 1}
    with pytest.raises(ResidencyError) as caught:
        check_residency(g, BOTH, grids, 132)
    assert str(caught.value) == (
        "one-GPU mode: 3A:1F needs 3×44 (attention) + 1×2 (ffn) = 134 CTAs resident at once; "
        "the GPU has 132 SMs: lower --num-sms"
    )
