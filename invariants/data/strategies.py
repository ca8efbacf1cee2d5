"""Hypothesis strategies for valid routes and single-entry invalid routes.

Large route tensors come from a drawn seed through random_routes, so a
256-token case costs a handful of draws instead of thousands.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from afdep.vocab import RouteKind
from invariants.data.inputs import random_routes

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@st.composite
def valid_routes(
    draw,
    *,
    max_capacity: int = 256,
    max_top_k: int = 8,
    max_experts: int = 64,
    min_top_k: int = 1,
    min_tokens: int = 0,
    min_padding: int = 0,
    min_capacity: int = 0,
    top_k: int | None = None,
    num_experts: int | None = None,
):
    """(topk_idx int64 [C, K], num_experts, num_tokens), valid by every rule.

    Pass `top_k` / `num_experts` to fix them, e.g. to share them across ranks.
    """
    if top_k is None:
        top_k = draw(st.integers(min_top_k, max_top_k))
    if num_experts is None:
        num_experts = draw(st.integers(top_k, max(top_k, max_experts)))
    low = max(min_capacity, min_tokens + min_padding)
    # Bias towards the edges: no tokens, one token, and full-size batches.
    capacity = draw(
        st.one_of(st.integers(low, max(low, 2)), st.integers(low, max(low, max_capacity)))
    )
    num_tokens = draw(
        st.one_of(
            st.sampled_from(sorted({min_tokens, capacity - min_padding})),
            st.integers(min_tokens, capacity - min_padding),
        )
    )
    empty_prob = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    skew = draw(st.one_of(st.none(), st.integers(0, num_experts - 1)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    topk_idx = random_routes(
        num_tokens, capacity, num_experts, top_k, gen, empty_prob=empty_prob, skew=skew
    )
    return topk_idx, num_experts, num_tokens


def _ensure_earlier_id(
    draw, topk_idx: torch.Tensor, num_experts: int, token: int, slot: int
) -> None:
    """Give row `token` a non-negative id before `slot`, keeping the row valid."""
    if bool((topk_idx[token, :slot] >= 0).any()):
        return
    used = set(topk_idx[token].tolist())
    # The row has at most K - 1 ids (slot 0 is -1) and K <= E, so one is free.
    free = [e for e in range(num_experts) if e not in used]
    topk_idx[token, 0] = draw(st.sampled_from(free))


@st.composite
def invalid_route_case(draw, *, kinds=tuple(RouteKind), **route_kwargs):
    """A valid case with exactly one invalid entry, which is the first violation.

    Returns (topk_idx, num_experts, num_tokens, kind, token, slot).
    """
    kind = draw(st.sampled_from(kinds))
    need = {
        RouteKind.DUMMY: {"min_padding": 1},
        RouteKind.DUPLICATE: {"min_top_k": 2, "min_tokens": 1},
    }
    kwargs = {"min_capacity": 1, **route_kwargs, **need.get(kind, {})}
    topk_idx, num_experts, num_tokens = draw(valid_routes(**kwargs))
    topk_idx = topk_idx.clone()
    capacity, top_k = topk_idx.shape
    if kind == RouteKind.NEGATIVE:
        token = draw(st.integers(0, capacity - 1))
        slot = draw(st.integers(0, top_k - 1))
        value = draw(st.one_of(st.just(-2), st.integers(_INT64_MIN, -2)))
    elif kind == RouteKind.WIDE:
        token = draw(st.integers(0, capacity - 1))
        slot = draw(st.integers(0, top_k - 1))
        value = draw(st.one_of(st.just(num_experts), st.integers(num_experts, _INT64_MAX)))
    elif kind == RouteKind.DUMMY:
        # Padding rows are all -1, so any in-range id there is dummy and nothing else.
        token = draw(st.integers(num_tokens, capacity - 1))
        slot = draw(st.integers(0, top_k - 1))
        value = draw(st.integers(0, num_experts - 1))
    else:
        token = draw(st.integers(0, num_tokens - 1))
        slot = draw(st.integers(1, top_k - 1))
        _ensure_earlier_id(draw, topk_idx, num_experts, token, slot)
        earlier = [e for e in topk_idx[token, :slot].tolist() if e >= 0]
        value = draw(st.sampled_from(earlier))
    # The replaced id leaves the row and the other ids stay distinct and in range,
    # so this is the only invalid entry, hence also the first.
    topk_idx[token, slot] = value
    return topk_idx, num_experts, num_tokens, kind, token, slot
