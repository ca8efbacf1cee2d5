"""Checks that a dispatch result obeys docs/data-layout.md, bit for bit.

The checks derive everything from the sources (not from dispatch_reference), so
they can judge the reference as well as the kernels. Output buffers may be
longer than the result: only the first R_f (or N_f) rows are checked.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from afdep.routes import validate
from invariants.data.inputs import SourceInputs
from invariants.data.reference import (
    CollectView,
    ExpertLayout,
    experts_per_ffn,
    local_expert_of_rows,
    take_rows,
)

_INT_OF_WIDTH = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class LayoutError(AssertionError):
    """A dispatch output that breaks the layout contract."""


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.dtype == torch.bool:
        return t.to(torch.uint8)
    return t.view(_INT_OF_WIDTH[t.element_size()])


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when shapes, dtypes and every bit agree (so -0 != +0 and NaN == same NaN)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(_bits(a), _bits(b.to(a.device)))


def first_mismatch(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Describe the first differing (row, col) of two tensors, or None if bitwise equal."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype differ: a={tuple(a.shape)} {a.dtype} b={tuple(b.shape)} {b.dtype}"
    if bitwise_equal(a, b):
        return None
    rows = a.shape[0] if a.dim() else 1
    a2, b2 = a.reshape(rows, -1), b.to(a.device).reshape(rows, -1)
    differ = _bits(a2) != _bits(b2)
    row, col = divmod(int(differ.flatten().to(torch.uint8).argmax()), a2.shape[1])
    return (
        f"{int(differ.sum())} elements differ, first at {row=} {col=}: "
        f"{_values('a', a2[row, col], 'b', b2[row, col])}"
    )


def _values(name_a: str, va: torch.Tensor, name_b: str, vb: torch.Tensor) -> str:
    return (
        f"{name_a}={_scalar(va)} {name_b}={_scalar(vb)} "
        f"bits {name_a}={_hex_bits(va)} {name_b}={_hex_bits(vb)}"
    )


def _hex_bits(v: torch.Tensor) -> str:
    width = 8 * v.element_size()
    return f"{_bits(v).item() & ((1 << width) - 1):#0{width // 4 + 2}x}"


def _scalar(v: torch.Tensor):
    return v.float().item() if v.dtype.is_floating_point else v.item()


def _first(mask: torch.Tensor) -> int | None:
    """Flat index of the first True, or None."""
    flat = mask.flatten()
    if flat.numel() == 0 or not bool(flat.any()):
        return None
    return int(flat.to(torch.uint8).argmax())


def _refuse(mask: torch.Tensor, say: Callable[[int], str]) -> None:
    """LayoutError saying `say(i)` at the first True of `mask` (flat index
    i), when there is one."""
    index = _first(mask)
    if index is not None:
        raise LayoutError(say(index))


class _Sources:
    """The attention ranks' inputs, padded into [A, C_max, K] lookup tables."""

    def __init__(
        self, sources: list[SourceInputs], ffn_local: int, num_experts: int, ffn_ranks: int
    ):
        epf = experts_per_ffn(num_experts, ffn_ranks)
        if not sources:
            raise ValueError("sources must hold at least one attention rank")
        if not 0 <= ffn_local < ffn_ranks:
            raise ValueError(f"ffn_local must be in [0, {ffn_ranks}), got {ffn_local}")
        for s in sources:
            validate(s.topk_idx, num_experts, s.num_tokens)
        self.list = sources
        self.first, self.epf = ffn_local * epf, epf
        self.top_k = sources[0].top_k
        self.device = sources[0].topk_idx.device
        cap = max(s.capacity for s in sources)
        shape = (len(sources), cap, self.top_k)
        self.topk = torch.full(shape, -1, dtype=torch.int64, device=self.device)
        self.weights = torch.zeros(shape, dtype=torch.float32, device=self.device)
        for a, s in enumerate(sources):
            # Padding tokens route nowhere: keep only the real ones.
            self.topk[a, : s.num_tokens] = s.topk_idx[: s.num_tokens]
            self.weights[a, : s.num_tokens] = s.topk_weights[: s.num_tokens]
        self.num_tokens = torch.tensor([s.num_tokens for s in sources], device=self.device)
        self.on_f = (self.topk >= self.first) & (self.topk < self.first + epf)
        self.row_base = torch.tensor(
            [0] + [s.capacity for s in sources], device=self.device
        ).cumsum(0)

    def rows(self, ranks: torch.Tensor, tokens: torch.Tensor):
        """(x, x_scales) of the given source rows."""
        x = torch.cat(
            [s.x.view(torch.uint8) if s.x.element_size() == 1 else s.x for s in self.list]
        )
        if self.list[0].x.element_size() == 1:
            x = x.view(self.list[0].x.dtype)
        index = self.row_base[ranks.long()] + tokens.long()
        scales = None
        if self.list[0].x_scales is not None:
            scales = torch.cat([s.x_scales for s in self.list])[index]
        return take_rows(x, index), scales


def _check_meta(
    name: str,
    t: torch.Tensor,
    dtype: torch.dtype,
    rows: int,
    ffn_local: int,
    width: int | None = None,
):
    """Metadata shape: [>= rows] or, with `width`, [>= rows, width]."""
    dims = 1 if width is None else 2
    if (
        t.dtype != dtype
        or t.dim() != dims
        or t.shape[0] < rows
        or (width is not None and t.shape[1] != width)
    ):
        wanted = f"[>= {rows}]" if width is None else f"[>= {rows}, {width}]"
        raise LayoutError(
            f"{name} must be {dtype} {wanted}: {ffn_local=} "
            f"got shape={tuple(t.shape)} dtype={t.dtype}"
        )


def _check_rows(
    what: str, got: torch.Tensor, expected: torch.Tensor, ffn_local: int, context
) -> None:
    if got.dtype != expected.dtype or got.shape[1:] != expected.shape[1:]:
        raise LayoutError(
            f"{what}: {ffn_local=} expected dtype={expected.dtype} "
            f"shape={tuple(expected.shape)} got dtype={got.dtype} "
            f"shape={tuple(got.shape)}"
        )
    if got.shape[0] < expected.shape[0]:
        raise LayoutError(
            f"{what} has too few rows: {ffn_local=} expected={expected.shape[0]} got={got.shape[0]}"
        )
    differ = (_bits(got[: expected.shape[0]]) != _bits(expected)).flatten(1)
    index = _first(differ)
    if index is not None:
        row, col = divmod(index, differ.shape[1])
        detail = _values("got", got[row].flatten()[col], "expected", expected[row].flatten()[col])
        raise LayoutError(
            f"{what} differs from the source row: {ffn_local=} {row=} "
            f"{context(row)} {col=} {detail}"
        )


def check_expert_layout(
    layout: ExpertLayout,
    sources: list[SourceInputs],
    ffn_local: int,
    num_experts: int,
    ffn_ranks: int,
    *,
    with_rows: bool = True,
) -> None:
    """Raise LayoutError unless `layout` is exactly FFN `ffn_local`'s expert-major output."""
    src = _Sources(sources, ffn_local, num_experts, ffn_ranks)
    _check_offsets(layout.expert_offsets, src, ffn_local)
    rows = int(layout.expert_offsets[-1])
    for name, dtype in (
        ("src_rank", torch.int32),
        ("src_token", torch.int32),
        ("topk_slot", torch.int32),
        ("weight", torch.float32),
    ):
        _check_meta(name, getattr(layout, name), dtype, rows, ffn_local)
    a, t = layout.src_rank[:rows].long(), layout.src_token[:rows].long()
    k = layout.topk_slot[:rows].long()

    def at(r: int) -> str:
        return f"src_rank={int(a[r])} src_token={int(t[r])} topk_slot={int(k[r])}"

    expected_expert = _check_row_slots(layout, src, (a, t, k), ffn_local, at)
    # (j, a, t) must strictly increase: equal keys are a pair stored twice.
    cap = src.topk.shape[1]
    key = (expected_expert * len(sources) + a) * cap + t
    step = key[1:] - key[:-1]
    row = _first(step <= 0)
    if row is not None:
        problem = "a pair appears twice" if int(step[row]) == 0 else "rows out of (j, a, t) order"
        raise LayoutError(
            f"{problem}: {ffn_local=} row={row + 1} {at(row + 1)} previous: {at(row)}"
        )
    if with_rows:
        _check_payload("", layout, src.rows(a, t), ffn_local, at)


def _check_payload(prefix: str, got, expected, ffn_local: int, at) -> None:
    """`got.x` (and `got.x_scales` for fp8) bitwise the sources' rows `expected`."""
    x, scales = expected
    _check_rows(f"{prefix}x", got.x, x, ffn_local, at)
    if scales is not None:
        if got.x_scales is None:
            raise LayoutError(f"{prefix}x_scales missing for an fp8 payload: {ffn_local=}")
        _check_rows(f"{prefix}x_scales", got.x_scales, scales, ffn_local, at)


def _check_offsets(offsets: torch.Tensor, src: _Sources, ffn_local: int) -> None:
    """int32 prefix sums of the per-expert counts, from 0."""
    if offsets.dtype != torch.int32 or tuple(offsets.shape) != (src.epf + 1,):
        raise LayoutError(
            f"expert_offsets must be int32 [{src.epf + 1}]: {ffn_local=} "
            f"got shape={tuple(offsets.shape)} dtype={offsets.dtype}"
        )
    if int(offsets[0]) != 0:
        raise LayoutError(f"expert_offsets must start at 0: {ffn_local=} got={int(offsets[0])}")
    expected_counts = torch.bincount(src.topk[src.on_f] - src.first, minlength=src.epf)
    counts = (offsets[1:] - offsets[:-1]).long()
    _refuse(
        counts != expected_counts,
        lambda j: (
            f"expert_offsets are not the prefix sums of the per-expert counts: {ffn_local=} "
            f"{j=} expected_count={int(expected_counts[j])} got_count={int(counts[j])} "
            f"offsets={offsets.tolist()}"
        ),
    )


def _check_row_slots(
    layout: ExpertLayout, src: _Sources, slots, ffn_local: int, at
) -> torch.Tensor:
    """Each row's (src_rank, src_token, topk_slot) in range, naming the row's
    expert, with that slot's weight; the rows' experts returned."""
    a, t, k = slots
    sources = len(src.list)
    out_of_range = (a < 0) | (a >= sources) | (k < 0) | (k >= src.top_k) | (t < 0)
    out_of_range |= t >= src.num_tokens[a.clamp(0, sources - 1)]
    _refuse(
        out_of_range,
        lambda row: (
            f"metadata out of range (src_token must be < num_tokens): {ffn_local=} {row=} {at(row)}"
        ),
    )
    expected_expert = src.first + local_expert_of_rows(layout.expert_offsets)
    got_expert = src.topk[a, t, k]
    _refuse(
        got_expert != expected_expert,
        lambda row: (
            f"metadata does not point back to the row's expert: {ffn_local=} "
            f"{row=} {at(row)} expected={int(expected_expert[row])} got={int(got_expert[row])}"
        ),
    )
    rows = a.numel()
    _refuse(
        _bits(layout.weight[:rows]) != _bits(src.weights[a, t, k]),
        lambda row: (
            f"weight differs from topk_weights: {ffn_local=} {row=} {at(row)} "
            f"expected={src.weights[a[row], t[row], k[row]].item()} got={layout.weight[row].item()}"
        ),
    )
    return expected_expert


def check_collect_view(
    view: CollectView,
    layout: ExpertLayout,
    sources: list[SourceInputs],
    ffn_local: int,
    num_experts: int,
    ffn_ranks: int,
) -> None:
    """Raise LayoutError unless `view` (and `layout.collect_row`) obey the collect contract."""
    src = _Sources(sources, ffn_local, num_experts, ffn_ranks)
    ea, et = src.on_f.any(dim=2).nonzero(as_tuple=True)  # (a, t) order
    n_rows = ea.numel()
    for name in ("src_rank", "src_token"):
        _check_meta(name, getattr(view, name), torch.int32, n_rows, ffn_local)
    for name, dtype in (
        ("local_experts", torch.int32),
        ("weights", torch.float32),
        ("expert_rows", torch.int32),
    ):
        _check_meta(name, getattr(view, name), dtype, n_rows, ffn_local, src.top_k)
    a, t = view.src_rank[:n_rows].long(), view.src_token[:n_rows].long()
    _refuse(
        (a != ea) | (t != et),
        lambda row: (
            "collect rows must be the routed (a, t) in order, once each: "
            f"{ffn_local=} {row=} expected=({int(ea[row])}, {int(et[row])}) "
            f"got=({int(a[row])}, {int(t[row])})"
        ),
    )

    def at(c: int) -> str:
        return f"src_rank={int(a[c])} src_token={int(t[c])}"

    _check_payload("collect ", view, src.rows(a, t), ffn_local, at)

    on_f, topk = src.on_f[ea, et], src.topk[ea, et]
    expected_local = torch.where(on_f, topk - src.first, -1)
    got_local = view.local_experts[:n_rows].long()
    _check_slots(
        "local_experts", got_local != expected_local, ffn_local, at, expected_local, got_local
    )
    expected_w = torch.where(on_f, src.weights[ea, et], 0.0)
    _check_slots(
        "weights",
        _bits(view.weights[:n_rows]) != _bits(expected_w),
        ffn_local,
        at,
        expected_w,
        view.weights,
    )

    _check_row_links(view, layout, src, (a, t, on_f), ffn_local, at)


def _check_row_links(
    view: CollectView, layout: ExpertLayout, src: _Sources, pairs, ffn_local: int, at
) -> None:
    """expert_rows points at the expert-major row of each (a, t, k) on this
    rank (else -1), and collect_row is its inverse."""
    a, t, on_f = pairs
    n_rows = a.numel()
    rows = int(layout.expert_offsets[-1])
    _check_meta("collect_row", layout.collect_row, torch.int32, rows, ffn_local)
    expert_rows = view.expert_rows[:n_rows].long()
    safe = expert_rows.clamp(0, max(rows - 1, 0))
    slot = torch.arange(src.top_k, device=src.device).expand_as(expert_rows)
    points_back = (expert_rows >= 0) & (expert_rows < rows)
    if rows > 0:
        points_back &= layout.src_rank[safe].long() == a.unsqueeze(1)
        points_back &= layout.src_token[safe].long() == t.unsqueeze(1)
        points_back &= layout.topk_slot[safe].long() == slot
    wrong = torch.where(on_f, ~points_back, expert_rows != -1)
    _check_slots(
        "expert_rows (the expert-major row of (a, t, k), else -1)",
        wrong,
        ffn_local,
        at,
        None,
        expert_rows,
    )

    collect_row = layout.collect_row[:rows].long()
    k = layout.topk_slot[:rows].long()
    valid = (collect_row >= 0) & (collect_row < n_rows)
    c_safe = collect_row.clamp(0, max(n_rows - 1, 0))
    r = torch.arange(rows, device=src.device)
    if n_rows > 0:
        valid &= expert_rows[c_safe, k.clamp(0, src.top_k - 1)] == r
    _refuse(
        ~valid,
        lambda row: (
            f"collect_row is not the inverse of expert_rows: {ffn_local=} "
            f"{row=} topk_slot={int(k[row])} got={int(collect_row[row])}"
        ),
    )


def _check_slots(name: str, wrong: torch.Tensor, ffn_local: int, at, expected, got) -> None:
    index = _first(wrong)
    if index is None:
        return
    c, k = divmod(index, wrong.shape[1])
    want = "" if expected is None else f"expected={expected[c, k].item()} "
    raise LayoutError(
        f"collect {name} wrong: {ffn_local=} row={c} slot={k} {at(c)} {want}got={got[c, k].item()}"
    )
