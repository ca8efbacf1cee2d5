"""One driver step on one rank, eager or replayed from a CUDA graph, and its
bitwise checks against the reference."""

from __future__ import annotations

import statistics

import torch
import torch.distributed as dist

from afdep.buffer import Buffer, FfnBatch
from afdep.routes import find_invalid
from afdep.vocab import MISMATCH, Protocol, Role, RouteKind
from invariants.data.inputs import SourceInputs, graph_inputs, load_graph_inputs
from invariants.data.layout import LayoutError, check_expert_layout, first_mismatch
from invariants.data.reference import (
    CollectView,
    ExpertLayout,
    combine_reference,
    dispatch_reference,
    expert_function,
    take_rows,
)
from tools.driver.skew import delay_stream


def inject_invalid_route(sources: list[SourceInputs], kind: RouteKind, num_experts: int):
    """Break every attention rank's routes with one entry of `kind`; returns the
    first violation as the host check (afdep.routes) reports it."""
    found = None
    for source in sources:
        topk, n = source.topk_idx, source.num_tokens
        if kind == RouteKind.NEGATIVE:
            topk[0, 0] = -5
        elif kind == RouteKind.WIDE:
            topk[0, 0] = num_experts + 3
        elif kind == RouteKind.DUMMY:
            topk[n, 0] = 0  # the first padding token names a real expert
        else:  # duplicate: slot 1 repeats slot 0
            topk[0, :] = -1
            topk[0, 0] = topk[0, 1] = 0
        found = find_invalid(topk, num_experts, n)
        if found is None or found[0] != kind:
            raise AssertionError(f"injecting {kind=} gave {found=}")
    return found


def expert_outputs(batch: FfnBatch, buffer: Buffer) -> torch.Tensor:
    """The expert function over every row of the receive buffers, with no host
    sync (graph-safe): rows past this step's count get a harmless expert id."""
    g = buffer.geometry
    rows = torch.arange(g.max_rows, device=buffer.device, dtype=torch.int32)
    local = torch.searchsorted(batch.expert_offsets[1:], rows, right=True)
    experts = (buffer.rank - g.num_attention) * g.experts_per_ffn + local
    if batch.collect is None:
        return expert_function(batch.x, batch.x_scales, experts)
    index = batch.collect_row.clamp(0, g.max_collect_rows - 1).long()
    x = take_rows(batch.collect.x, index)
    scales = None if batch.collect.x_scales is None else batch.collect.x_scales[index]
    return expert_function(x, scales, experts)


class StepRunner:
    def __init__(self, buffer: Buffer, *, graph: bool) -> None:
        self.buffer = buffer
        self.graph = graph
        g = buffer.geometry
        self.out: torch.Tensor | None = None
        self.bucket = g.capacity  # the host-known bound that picks the protocol
        self._graphs: dict[Protocol, torch.cuda.CUDAGraph] = {}  # captured once per protocol
        self._bench_graphs: dict[Protocol, tuple[torch.cuda.CUDAGraph, torch.cuda.CUDAGraph]] = {}
        if buffer.role == Role.ATTENTION:
            self.static = graph_inputs(g, buffer.device)

    # ---------------------------------------------------------------- running
    def _dispatch(self, skip_send: bool = False, experts: bool = True) -> None:
        if self.buffer.role == Role.ATTENTION:
            self.buffer.dispatch(**self.static, bucket=self.bucket, skip_send=skip_send)
        else:
            self._batch = self.buffer.dispatch(bucket=self.bucket, skip_send=skip_send)
            if experts:
                self._y = expert_outputs(self._batch, self.buffer)

    def _combine(self) -> None:
        if self.buffer.role == Role.ATTENTION:
            self.out = self.buffer.combine()
        else:
            self.buffer.combine(self._y)

    def _load(self, sources: list[SourceInputs]) -> None:
        if self.buffer.role == Role.ATTENTION:
            load_graph_inputs(self.static, sources[self.buffer.rank])

    def step(
        self,
        sources: list[SourceInputs],
        *,
        bucket: int,
        skip_send: bool = False,
        delay_cycles: int = 0,
    ) -> None:
        """One step of `bucket` tokens (every rank passes the same bucket),
        its kernels queued `delay_cycles` late on the current stream (the
        launch skew, docs/synchronization.md "Launch skew")."""
        self.bucket = bucket
        self._load(sources)
        # Ranks start each step together. The last step's host-side checks take
        # a different time on each rank; a skew of milliseconds lets a producer
        # finish before its consumer starts and so hides the window a fault
        # opens (N2 on 2xH200 at d6c65beb: killed in 3 of 3 runs one sweep,
        # 0 of 4 the next, its kills all on the epilogue's epoch assertion). A
        # peer that trapped is seen by torchrun, which stops every rank; RankPair's
        # parent gives up on a silent worker after REPLY_TIMEOUT_S.
        dist.barrier()
        if not self.graph:
            delay_stream(delay_cycles)
            self._dispatch(skip_send)
            self._combine()
            return
        protocol = self.buffer.protocol_for(bucket)
        if protocol not in self._graphs:  # the whole step, captured once per protocol
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._dispatch(skip_send)
                self._combine()
            self._graphs[protocol] = graph
        # After the capture, which synchronizes the device, and outside the graph.
        delay_stream(delay_cycles)
        self._graphs[protocol].replay()

    def bench(self, sources: list[SourceInputs], iters: int) -> dict[str, float]:
        """Median µs of dispatch, combine and the round trip over graph replays
        (dispatch and combine captured as two graphs so events can sit between).
        The FFN reuses the last step's expert outputs: only afdep is timed."""
        protocol = self.buffer.protocol_for(self.bucket)
        if protocol not in self._bench_graphs:
            graphs = (torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph())
            with torch.cuda.graph(graphs[0]):
                self._dispatch(experts=False)
            with torch.cuda.graph(graphs[1]):
                self._combine()
            self._bench_graphs[protocol] = graphs
        bench_graphs = self._bench_graphs[protocol]
        self._load(sources)
        samples: dict[str, list[float]] = {"dispatch": [], "combine": [], "round_trip": []}
        for _ in range(iters):
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            dist.barrier()
            marks[0].record()
            bench_graphs[0].replay()
            marks[1].record()
            bench_graphs[1].replay()
            marks[2].record()
            marks[2].synchronize()
            samples["dispatch"].append(marks[0].elapsed_time(marks[1]) * 1e3)
            samples["combine"].append(marks[1].elapsed_time(marks[2]) * 1e3)
            samples["round_trip"].append(marks[0].elapsed_time(marks[2]) * 1e3)
        return {name: round(statistics.median(v), 2) for name, v in samples.items()}

    # ---------------------------------------------------------------- checking
    def check(self, sources: list[SourceInputs], step: int, num_tokens: int, references=None):
        """This rank's step against the reference, bitwise: an FFN rank's
        receive buffers (and the layout invariants), an attention rank's
        combined output. Returns (checks made, mismatch messages).
        `references`: the step's dispatch_reference, when the caller made it
        once for every rank of the step (logical ranks)."""
        g = self.buffer.geometry
        if references is None:
            references = dispatch_reference(sources, g.num_experts, g.ffn_ranks)
        where = f"rank={self.buffer.rank} step={step} tokens={num_tokens}"
        mismatches = []
        if self.buffer.role == Role.FFN:
            layout, view = references[self.buffer.rank - g.num_attention]
            rows = int(layout.expert_offsets[-1])
            compared = self._dispatch_compared(layout, view, rows)
            # A second oracle: the invariants, from the sources.
            mismatches += self._layout_mismatches(sources, rows, where)
        else:
            compared = self._combine_compared(sources, [layout for layout, _ in references])
        for name, got, want in compared:
            problem = first_mismatch(got, want)
            if problem is not None:
                mismatches.append(f"{MISMATCH} {name} {where}: {problem}")
        return len(compared) + (self.buffer.role == Role.FFN), mismatches

    def _dispatch_compared(
        self, layout: ExpertLayout, view: CollectView, rows: int
    ) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        """(name, afdep's, the reference's) for each field of the first `rows`
        received rows: expert-major, or the collect view when afdep gave one."""
        batch = self._batch
        compared = [("expert_offsets", batch.expert_offsets, layout.expert_offsets)]
        for name in ("src_rank", "src_token", "topk_slot", "weight", "collect_row"):
            compared.append((name, getattr(batch, name)[:rows], getattr(layout, name)))
        if batch.collect is None:
            compared.append(("x", batch.x[:rows], layout.x))
            if layout.x_scales is not None:
                compared.append(("x_scales", batch.x_scales[:rows], layout.x_scales))
            return compared
        n = view.src_rank.shape[0]
        for name in (
            "x",
            "x_scales",
            "src_rank",
            "src_token",
            "local_experts",
            "weights",
            "expert_rows",
        ):
            if getattr(view, name) is not None:
                compared.append(
                    (f"collect.{name}", getattr(batch.collect, name)[:n], getattr(view, name))
                )
        return compared

    def _combine_compared(
        self, sources: list[SourceInputs], layouts: list[ExpertLayout]
    ) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
        """This attention rank's combined output against the reference combine
        of the expert function over every FFN rank's reference layout."""
        g = self.buffer.geometry
        ys = []
        for f, layout in enumerate(layouts):
            local = torch.searchsorted(
                layout.expert_offsets[1:],
                torch.arange(
                    layout.src_rank.shape[0], device=layout.src_rank.device, dtype=torch.int32
                ),
                right=True,
            )
            ys.append(expert_function(layout.x, layout.x_scales, f * g.experts_per_ffn + local))
        expected = combine_reference(sources, layouts, ys, g.num_experts, g.ffn_ranks)
        n = sources[self.buffer.rank].num_tokens
        return [("out", self.out[:n], expected[self.buffer.rank])]

    def _layout_mismatches(self, sources: list[SourceInputs], rows: int, where: str) -> list[str]:
        """The layout invariants (invariants/data/layout.py) on afdep's first
        `rows` received rows, checked from the sources alone."""
        g = self.buffer.geometry
        try:
            check_expert_layout(
                self._as_layout(rows),
                sources,
                self.buffer.rank - g.num_attention,
                g.num_experts,
                g.ffn_ranks,
            )
        except LayoutError as error:
            return [f"{MISMATCH} layout invariant {where}: {error}"]
        return []

    def _as_layout(self, rows: int) -> ExpertLayout:
        """afdep's expert-major output as the reference's type (rows gathered
        from the collect view when that is what afdep produced)."""
        batch = self._batch
        x, scales = batch.x, batch.x_scales
        if batch.collect is not None:
            index = batch.collect_row[:rows].long()
            x = take_rows(batch.collect.x, index)
            scales = None if batch.collect.x_scales is None else batch.collect.x_scales[index]
        return ExpertLayout(
            x=x[:rows],
            x_scales=None if scales is None else scales[:rows],
            src_rank=batch.src_rank[:rows],
            src_token=batch.src_token[:rows],
            topk_slot=batch.topk_slot[:rows],
            weight=batch.weight[:rows],
            expert_offsets=batch.expert_offsets,
            collect_row=batch.collect_row[:rows],
        )
