"""Pure-torch reference of dispatch, expert function and combine (docs/data-layout.md).

Everything is vectorized over tokens and hidden; loops run only over ranks and
top-k slots. Tensors are created on the inputs' device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from afdep.routes import validate
from invariants.data.inputs import FP8_BLOCK, SourceInputs


@dataclass
class ExpertLayout:
    """Dispatch output on one FFN rank, rows ordered by (local expert, src rank, src token)."""

    x: torch.Tensor  # [R, H] source rows
    x_scales: torch.Tensor | None  # [R, H/128] fp32, None for bf16
    src_rank: torch.Tensor  # [R] int32
    src_token: torch.Tensor  # [R] int32
    topk_slot: torch.Tensor  # [R] int32
    weight: torch.Tensor  # [R] fp32
    expert_offsets: torch.Tensor  # [experts_per_ffn + 1] int32
    collect_row: torch.Tensor  # [R] int32, row of the same (a, t) in the collect view


@dataclass
class CollectView:
    """One row per (src rank, src token) routed to the FFN rank, in (a, t) order."""

    x: torch.Tensor  # [N, H]
    x_scales: torch.Tensor | None  # [N, H/128]
    src_rank: torch.Tensor  # [N] int32
    src_token: torch.Tensor  # [N] int32
    local_experts: torch.Tensor  # [N, K] int32, -1 where the slot is not on this FFN
    weights: torch.Tensor  # [N, K] fp32, +0 where the slot is not on this FFN
    expert_rows: torch.Tensor  # [N, K] int32, expert-major row or -1


def experts_per_ffn(num_experts: int, ffn_ranks: int) -> int:
    if ffn_ranks <= 0 or num_experts <= 0 or num_experts % ffn_ranks != 0:
        raise ValueError(
            f"num_experts must be a positive multiple of ffn_ranks, got {num_experts=} {ffn_ranks=}"
        )
    return num_experts // ffn_ranks


def expert_scale(e):
    """s(e) = 0.5 + (e % 8) * 0.25, for an int (-> float) or a tensor (-> fp32)."""
    if isinstance(e, torch.Tensor):
        return 0.5 + (e % 8).to(torch.float32) * 0.25
    return 0.5 + (e % 8) * 0.25


def expert_function(
    x: torch.Tensor, x_scales: torch.Tensor | None, global_expert: torch.Tensor
) -> torch.Tensor:
    """y[r] = (xf[r] * s(e_r)).to(bf16); fp8 rows are dequantized by one multiply."""
    xf = x.float()
    if x_scales is not None:
        xf = xf * x_scales.repeat_interleave(FP8_BLOCK, dim=1)
    return (xf * expert_scale(global_expert).unsqueeze(1)).to(torch.bfloat16)


def local_expert_of_rows(expert_offsets: torch.Tensor) -> torch.Tensor:
    """int64 [R]: the local expert j of each expert-major row, from the offsets."""
    counts = (expert_offsets[1:] - expert_offsets[:-1]).long()
    local = torch.arange(counts.numel(), device=expert_offsets.device)
    return local.repeat_interleave(counts)


def apply_experts(
    layout: ExpertLayout, ffn_local: int, num_experts: int, ffn_ranks: int
) -> torch.Tensor:
    """The expert function over a materialized expert-major layout: y_f [R, H] bf16."""
    epf = experts_per_ffn(num_experts, ffn_ranks)
    rows = int(layout.expert_offsets[-1])
    experts = ffn_local * epf + local_expert_of_rows(layout.expert_offsets)
    scales = None if layout.x_scales is None else layout.x_scales[:rows]
    return expert_function(layout.x[:rows], scales, experts)


def take_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    # 1-byte floats are moved as bytes: not every device has fp8 indexing kernels.
    if x.element_size() == 1 and x.dtype.is_floating_point:
        return x.view(torch.uint8)[index].view(x.dtype)
    return x[index]


def _cat_rows(parts: list[torch.Tensor]) -> torch.Tensor:
    if parts[0].element_size() == 1 and parts[0].dtype.is_floating_point:
        return torch.cat([p.view(torch.uint8) for p in parts]).view(parts[0].dtype)
    return torch.cat(parts)


def _check_sources(sources: list[SourceInputs], num_experts: int) -> None:
    if not sources:
        raise ValueError("sources must hold at least one attention rank")
    for source in sources:
        validate(source.topk_idx, num_experts, source.num_tokens)


@dataclass(frozen=True)
class _Stacked:
    """All real tokens of all attention ranks, stacked in (a, t) order."""

    topk: torch.Tensor
    weights: torch.Tensor
    x: torch.Tensor
    scales: torch.Tensor | None
    rank_of: torch.Tensor
    token_of: torch.Tensor
    capacity_bound: int

    @classmethod
    def of(cls, sources: list[SourceInputs]) -> _Stacked:
        device = sources[0].topk_idx.device
        return cls(
            topk=torch.cat([s.topk_idx[: s.num_tokens] for s in sources]),
            weights=torch.cat([s.topk_weights[: s.num_tokens] for s in sources]),
            x=_cat_rows([s.x[: s.num_tokens] for s in sources]),
            scales=None
            if sources[0].x_scales is None
            else torch.cat([s.x_scales[: s.num_tokens] for s in sources]),
            rank_of=torch.cat(
                [
                    torch.full((s.num_tokens,), a, dtype=torch.int64, device=device)
                    for a, s in enumerate(sources)
                ]
            ),
            token_of=torch.cat([torch.arange(s.num_tokens, device=device) for s in sources]),
            capacity_bound=max(max(s.capacity for s in sources), 1),
        )


def dispatch_reference(
    sources: list[SourceInputs], num_experts: int, ffn_ranks: int
) -> list[tuple[ExpertLayout, CollectView]]:
    """Expert-major layout and collect view of every FFN rank (by local index)."""
    epf = experts_per_ffn(num_experts, ffn_ranks)
    _check_sources(sources, num_experts)
    stacked = _Stacked.of(sources)
    return [_ffn_rank_output(stacked, len(sources), f * epf, epf) for f in range(ffn_ranks)]


def _ffn_rank_output(
    s: _Stacked, num_sources: int, first: int, epf: int
) -> tuple[ExpertLayout, CollectView]:
    """The expert-major layout and collect view of the FFN rank whose experts
    are `first` .. `first + epf - 1`."""
    topk, device = s.topk, s.topk.device
    on_f = (topk >= first) & (topk < first + epf)
    g, k = on_f.nonzero(as_tuple=True)
    j = topk[g, k] - first
    # (j, a, t) is unique because a token names each expert at most once.
    key = (j * num_sources + s.rank_of[g]) * s.capacity_bound + s.token_of[g]
    order = torch.argsort(key, stable=True)
    g, k, j = g[order], k[order], j[order]
    offsets = torch.zeros(epf + 1, dtype=torch.int32, device=device)
    offsets[1:] = torch.bincount(j, minlength=epf).cumsum(0)

    routed = on_f.any(dim=1).nonzero().squeeze(1)  # increasing, so in (a, t) order
    collect_of = torch.full((topk.shape[0],), -1, dtype=torch.int64, device=device)
    collect_of[routed] = torch.arange(routed.numel(), device=device)
    collect_row = collect_of[g]
    expert_rows = torch.full((routed.numel(), topk.shape[1]), -1, dtype=torch.int32, device=device)
    expert_rows[collect_row, k] = torch.arange(g.numel(), dtype=torch.int32, device=device)
    on_routed = on_f[routed]

    layout = ExpertLayout(
        x=take_rows(s.x, g),
        x_scales=None if s.scales is None else s.scales[g],
        src_rank=s.rank_of[g].int(),
        src_token=s.token_of[g].int(),
        topk_slot=k.int(),
        weight=s.weights[g, k],
        expert_offsets=offsets,
        collect_row=collect_row.int(),
    )
    view = CollectView(
        x=take_rows(s.x, routed),
        x_scales=None if s.scales is None else s.scales[routed],
        src_rank=s.rank_of[routed].int(),
        src_token=s.token_of[routed].int(),
        local_experts=torch.where(on_routed, topk[routed] - first, -1).int(),
        weights=torch.where(on_routed, s.weights[routed], 0.0),
        expert_rows=expert_rows,
    )
    return layout, view


def _slot_rows(layout: ExpertLayout, src_rank: int, num_tokens: int, top_k: int) -> torch.Tensor:
    """int64 [n, K]: the expert-major row holding (src_rank, t, k), or -1."""
    rows = int(layout.expert_offsets[-1])
    device = layout.src_rank.device
    mine = layout.src_rank[:rows] == src_rank
    row_of = torch.full((num_tokens, top_k), -1, dtype=torch.int64, device=device)
    row_of[layout.src_token[:rows][mine].long(), layout.topk_slot[:rows][mine].long()] = (
        torch.arange(rows, device=device)[mine]
    )
    return row_of


def combine_partials(
    sources: list[SourceInputs],
    layouts: list[ExpertLayout],
    ys: list[torch.Tensor],
    num_experts: int,
    ffn_ranks: int,
) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Step 1 of the combine: per attention rank, per FFN rank, (routes_to_f
    [n, 1] bool, the bf16 partial [n, H] that FFN rank sends)."""
    epf = experts_per_ffn(num_experts, ffn_ranks)
    _check_sources(sources, num_experts)
    if len(layouts) != ffn_ranks or len(ys) != ffn_ranks:
        raise ValueError(
            f"need one layout and one y per FFN rank, got {len(layouts)=} {len(ys)=} {ffn_ranks=}"
        )
    partials = []
    for a, source in enumerate(sources):
        n = source.num_tokens
        topk, w = source.topk_idx[:n], source.topk_weights[:n]
        per_ffn = []
        for f in range(ffn_ranks):
            on_f = (topk >= f * epf) & (topk < (f + 1) * epf)
            row_of = _slot_rows(layouts[f], a, n, topk.shape[1])
            if not torch.equal(row_of >= 0, on_f):
                raise ValueError(
                    f"layout of ffn_local={f} does not hold exactly the "
                    f"slots of src_rank={a} routed to it"
                )
            partial = weighted_partial(ys[f], row_of, on_f, w)
            per_ffn.append((on_f.any(dim=1, keepdim=True), partial))
        partials.append(per_ffn)
    return partials


def weighted_partial(
    y: torch.Tensor, row_of: torch.Tensor, on: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """Step 1's sum for each token: `p = +0`, then for k in order, where slot k
    is on this FFN rank, `p = p + w[k] * float(y[row_of[k]])`; bf16 [n, H].
    `row_of`, `on`, `weights`: [n, K] (the expert-major row, on this rank, weight)."""
    partial = torch.zeros(on.shape[0], y.shape[1], dtype=torch.float32, device=y.device)
    for k in range(on.shape[1]):
        take = on[:, k]
        if not bool(take.any()):
            continue
        yk = y[row_of[:, k].clamp(min=0)].float()
        # where, not a 0/1 mask multiply: a skipped slot adds nothing, not even
        # a signed zero or a NaN from the unrelated row it was clamped to.
        partial = torch.where(take.unsqueeze(1), partial + weights[:, k : k + 1] * yk, partial)
    return partial.to(torch.bfloat16)


def reduce_partials(per_ffn: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Step 2 of the combine on one attention rank: out [n, H] bf16, the FFN
    ranks' partials added in increasing order, each where its token routes."""
    first = per_ffn[0][1]
    acc = torch.zeros(first.shape, dtype=torch.float32, device=first.device)
    for routes_to_f, partial in per_ffn:
        acc = torch.where(routes_to_f, acc + partial.float(), acc)
    return acc.to(torch.bfloat16)


def combine_reference(
    sources: list[SourceInputs],
    layouts: list[ExpertLayout],
    ys: list[torch.Tensor],
    num_experts: int,
    ffn_ranks: int,
) -> list[torch.Tensor]:
    """out_a [n_a, H] bf16 per attention rank, with the two-level fixed-order reduction."""
    partials = combine_partials(sources, layouts, ys, num_experts, ffn_ranks)
    return [reduce_partials(per_ffn) for per_ffn in partials]
