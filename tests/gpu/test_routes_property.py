"""Property: for any valid routes (with -1 entries, skewed onto one expert,
few tokens or many) afdep's dispatch and combine equal the reference bitwise."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invariants.data.inputs import make_source_inputs

pytestmark = pytest.mark.gpu
GEOMETRY = {"num_experts": 32, "hidden": 512, "capacity": 256, "top_k": 8}


@pytest.fixture(scope="module", params=["bf16", "fp8"])
def pair(request):
    from tools.driver.pair import RankPair

    ranks = RankPair(2, payload=request.param, num_sms=7, **GEOMETRY)
    ranks.payload = request.param
    yield ranks
    ranks.close()


@st.composite
def step_inputs(draw):
    capacity = GEOMETRY["capacity"]
    num_tokens = draw(st.one_of(st.integers(0, 4), st.integers(5, capacity)))
    shape = draw(st.sampled_from(["dense", "sparse", "skewed"]))
    return {
        "num_tokens": num_tokens,
        "seed": draw(st.integers(0, 2**31 - 1)),
        "empty_prob": {"dense": 0.0, "sparse": 0.6, "skewed": 0.1}[shape],
        "skew": draw(st.integers(0, GEOMETRY["num_experts"] - 1)) if shape == "skewed" else None,
    }


@settings(deadline=None, max_examples=max(5, settings().max_examples // 5))
@given(inputs=step_inputs())
def test_any_valid_route_matches_reference(pair, inputs):
    sources = [
        make_source_inputs(
            rank=0,
            step=0,
            payload=pair.payload,
            hidden=GEOMETRY["hidden"],
            capacity=GEOMETRY["capacity"],
            top_k=GEOMETRY["top_k"],
            num_experts=GEOMETRY["num_experts"],
            **inputs,
        )
    ]
    checks, mismatches = pair.step(sources)
    assert checks > 0
    assert mismatches == []
