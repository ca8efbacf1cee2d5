"""The NCCL pipeline a user would write instead of afdep, doing the same job:
the row counts, then the rows with their routes through `all_to_all_single`,
the expansion to expert-major rows in torch, the weighted top-k sum on the FFN
rank, one bf16 partial per (token, FFN rank) back, and the sum over FFN ranks
on the source. The sums keep the reference's order (docs/data-layout.md,
"Combine"), so its output is bitwise afdep's; `tests/unit/tools/bench/test_pipeline.py`
holds it to `invariants.data.reference` on the CPU. bf16 payloads only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from invariants.data.reference import reduce_partials, weighted_partial
from tools.bench.timing import round_trip_us


@dataclass(frozen=True)
class SourcePack:
    """What one source sends: per FFN rank, the tokens routed there (in token
    order) and their rows, routes and weights, concatenated FFN rank by FFN rank."""

    tokens: list[torch.Tensor]  # per FFN rank: int64 token indices
    rows: torch.Tensor  # [sum, H] bf16
    routes: torch.Tensor  # [sum, K] int64 global experts (-1: none)
    weights: torch.Tensor  # [sum, K] fp32

    @property
    def counts(self) -> list[int]:
        return [int(t.numel()) for t in self.tokens]


def source_pack(
    x: torch.Tensor, topk: torch.Tensor, weights: torch.Tensor, ffn_ranks: int, epf: int
) -> SourcePack:
    """`x`, `topk`, `weights`: this source's real tokens only."""
    tokens = [
        ((topk >= f * epf) & (topk < (f + 1) * epf)).any(dim=1).nonzero().flatten()
        for f in range(ffn_ranks)
    ]
    order = torch.cat(tokens)
    return SourcePack(tokens, x[order], topk[order], weights[order])


@dataclass(frozen=True)
class Expanded:
    """The FFN rank's expert-major rows, ordered by (local expert, source, token)."""

    rows: torch.Tensor  # [R, H] the received rows, one per (token, local expert)
    experts: torch.Tensor  # [R] int64 global expert of each row
    row_of: torch.Tensor  # [N, K] int64 expert-major row of each received slot, -1 elsewhere
    on_rank: torch.Tensor  # [N, K] bool: the slot's expert is on this FFN rank


def ffn_expand(rows: torch.Tensor, routes: torch.Tensor, first: int, epf: int) -> Expanded:
    """`rows`/`routes`: everything received, in (source, token) order."""
    on_rank = (routes >= first) & (routes < first + epf)
    received, slot = on_rank.nonzero(as_tuple=True)
    experts = routes[received, slot]
    order = torch.argsort((experts - first) * rows.shape[0] + received)
    received, slot, experts = received[order], slot[order], experts[order]
    row_of = torch.full(routes.shape, -1, dtype=torch.int64, device=routes.device)
    row_of[received, slot] = torch.arange(received.numel(), device=routes.device)
    return Expanded(rows[received], experts, row_of, on_rank)


def ffn_partials(y: torch.Tensor, expanded: Expanded, weights: torch.Tensor) -> torch.Tensor:
    """[N, H] bf16: per received token, its slots on this rank in k order, the
    reference's own sum (invariants.data.reference.weighted_partial)."""
    return weighted_partial(y, expanded.row_of, expanded.on_rank, weights)


def source_reduce(
    partials: list[torch.Tensor], tokens: list[torch.Tensor], n: int, hidden: int
) -> torch.Tensor:
    """[n, H] bf16: each FFN rank's partials put at their tokens' rows, added in
    increasing FFN rank where each token routes (reference.reduce_partials);
    +0 for a token that routes nowhere."""
    device = partials[0].device
    per_ffn = []
    for partial, mine in zip(partials, tokens, strict=True):
        routed = torch.zeros(n, 1, dtype=torch.bool, device=device)
        routed[mine] = True
        full = torch.zeros(n, hidden, dtype=torch.bfloat16, device=device)
        full[mine] = partial
        per_ffn.append((routed, full))
    return reduce_partials(per_ffn)


def pipeline_step(source, args, group_rank: int, attention: int, world: int) -> torch.Tensor:
    """One round trip through NCCL (every rank calls it): the counts, the rows
    and routes out, the expansion and weighted sums on the FFN ranks (the
    expert-major rows stand for the FFN's output, as afdep's bench times it),
    the partials back and their sum. Returns the source's output (empty on an
    FFN rank)."""
    import torch.distributed as dist

    n, hidden, dev = source.num_tokens, args.hidden_size, source.x.device
    epf = args.num_experts // args.ffn_ranks
    is_source, top_k = group_rank < attention, source.topk_idx.shape[1]
    pack = (
        source_pack(source.x[:n], source.topk_idx[:n], source.topk_weights[:n], args.ffn_ranks, epf)
        if is_source
        else None
    )
    send = ([0] * attention + pack.counts) if is_source else [0] * world
    counts_out = torch.tensor(send, dtype=torch.int64, device=dev)
    counts_in = torch.empty_like(counts_out)
    dist.all_to_all_single(counts_in, counts_out)
    receive = counts_in.tolist()  # the host needs the splits: one synchronization
    empty = source.x[:0]
    out_rows, out_routes, out_weights = (
        (pack.rows, pack.routes, pack.weights) if is_source else (empty, empty, empty)
    )
    total = sum(receive)
    rows = torch.empty(total, hidden, dtype=source.x.dtype, device=dev)
    routes = torch.empty(total, top_k, dtype=torch.int64, device=dev)
    weights = torch.empty(total, top_k, dtype=torch.float32, device=dev)
    dist.all_to_all_single(rows, out_rows.contiguous(), receive, send)
    dist.all_to_all_single(routes, out_routes.to(torch.int64).contiguous(), receive, send)
    dist.all_to_all_single(weights, out_weights.to(torch.float32).contiguous(), receive, send)
    if is_source:
        partials = torch.empty(sum(send), hidden, dtype=torch.bfloat16, device=dev)
        dist.all_to_all_single(partials, rows[:0].to(torch.bfloat16), send, receive)
        per_ffn = list(partials.split(pack.counts))
        return source_reduce(per_ffn, pack.tokens, n, hidden)
    first = (group_rank - attention) * epf
    expanded = ffn_expand(rows, routes, first, epf)
    back = ffn_partials(expanded.rows, expanded, weights)
    dist.all_to_all_single(source.x[:0].new_empty(0, hidden), back, send, receive)
    return source.x[:0]


def nccl_pipeline_round_trip(source, args, iters: int, warmup: int) -> dict[str, float]:
    """The pipeline's round trip, median µs over `iters` (CUDA events)."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    attention = world - args.ffn_ranks

    def step():
        pipeline_step(source, args, rank, attention, world)

    return round_trip_us(step, iters, warmup)
