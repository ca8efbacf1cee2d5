"""One bench process (run by tools.bench.arms under torchrun): every arm, in the
order given, at every bucket, plus two references measured in the same
process: the same exchange through NCCL's all_to_all_single, and a plain peer
copy of the dispatched bytes. Prints one `AFDEP_BENCH {json}` line on rank 0.

Arms are environment sets: each gets its own Buffer built from
`Settings.from_env(<the process env + the arm's variables>)`, so arms share a
process, its GPUs and its clocks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

import afdep
from afdep.config import Settings
from afdep.jit import CSRC
from afdep.vocab import BENCH, Protocol, Role
from invariants.data.inputs import (
    SourceInputs,
    graph_inputs,
    inputs_of,
    load_graph_inputs,
)
from tools.bench.arms import TREE
from tools.bench.overlap import gemm_operands, overlap_us
from tools.bench.pipeline import nccl_pipeline_round_trip
from tools.bench.timing import round_trip_us
from tools.bench.traces import ProfilerUnavailable, aligned_lines, record_spans
from tools.driver.parts import buffer_arguments


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.worker")
    parser.add_argument("--arms", required=True, help="JSON object: arm name -> {VAR: value}")
    parser.add_argument("--order", nargs="+", required=True)
    parser.add_argument("--buckets", type=int, nargs="+", required=True)
    parser.add_argument("--payload", default="bf16")
    parser.add_argument("--hidden-size", type=int, default=2048)
    parser.add_argument("--capacity", type=int, default=2048)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--num-experts", type=int, default=128)
    parser.add_argument("--ffn-ranks", type=int, default=1)
    parser.add_argument("--num-sms", type=int, default=24)
    parser.add_argument(
        "--collect-view", action="store_true", help="the FFN ranks receive the collect view"
    )
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument(
        "--trace-buckets", type=int, nargs="*", default=[], help="per-kernel traces at these"
    )
    parser.add_argument("--trace-replays", type=int, default=5)
    parser.add_argument(
        "--overlap-buckets", type=int, nargs="*", default=[], help="the overlap screen at these"
    )
    parser.add_argument(
        "--overlap-gemm", type=int, nargs=3, default=[2048, 4096, 2048], metavar=("M", "N", "K")
    )
    parser.add_argument("--overlap-gemms", type=int, default=8, help="GEMMs per chain")
    parser.add_argument("--overlap-repeats", type=int, default=20)
    return parser.parse_args(argv)


def arm_config(variables: dict[str, str]) -> Settings:
    """The process environment with the arm's variables on top (its tree aside)."""
    return Settings.from_env({**os.environ, **{k: v for k, v in variables.items() if k != TREE}})


def arm_attentions(variables: dict[str, str]) -> Path | None:
    """A source-tree arm's kernel sources; None: this package's."""
    return Path(variables[TREE]) if TREE in variables else None


class ArmTimer:
    """A Buffer for one arm, its step captured as a dispatch graph and a
    combine graph, timed back to back (the protocol itself paces the ranks)."""

    def __init__(self, args, config: Settings, sources: Path | None = None) -> None:
        self.buffer = buffer = afdep.Buffer(
            **buffer_arguments(args), config=config, sources=sources
        )
        g = buffer.geometry
        self.inputs = graph_inputs(g, buffer.device)
        self.y = torch.zeros(g.max_rows, g.hidden, dtype=torch.bfloat16, device=buffer.device)
        self.graphs: dict[Protocol, tuple[torch.cuda.CUDAGraph, torch.cuda.CUDAGraph]] = {}
        self.bucket = g.capacity

    def _capture(self) -> tuple[torch.cuda.CUDAGraph, torch.cuda.CUDAGraph]:
        """Dispatch and combine as two graphs, once per protocol."""
        protocol = self.buffer.protocol_for(self.bucket)
        if protocol not in self.graphs:
            buffer, graphs = self.buffer, (torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph())
            with torch.cuda.graph(graphs[0]):
                if buffer.role == Role.ATTENTION:
                    buffer.dispatch(**self.inputs, bucket=self.bucket)
                else:
                    buffer.dispatch(bucket=self.bucket)
            with torch.cuda.graph(graphs[1]):
                buffer.combine(None if buffer.role == Role.ATTENTION else self.y)
            self.graphs[protocol] = graphs
        return self.graphs[protocol]

    def load(self, source) -> None:
        load_graph_inputs(self.inputs, source)
        self.bucket = source.num_tokens

    def replay_once(self) -> None:
        """One dispatch and one combine, on the current stream."""
        graphs = self._capture()
        graphs[0].replay()
        graphs[1].replay()

    def time(self, iters: int, warmup: int) -> dict[str, float]:
        graphs = self._capture()
        for _ in range(warmup):
            graphs[0].replay()
            graphs[1].replay()
        torch.cuda.synchronize()
        dist.barrier()
        marks = [[torch.cuda.Event(enable_timing=True) for _ in range(3)] for _ in range(iters)]
        for begin, middle, end in marks:
            begin.record()
            graphs[0].replay()
            middle.record()
            graphs[1].replay()
            end.record()
        torch.cuda.synchronize()
        return _medians(marks)

    def trace(self, replays: int) -> list:
        """This rank's kernel spans over `replays` dispatch+combine replays."""
        graphs = self._capture()

        def once() -> None:
            graphs[0].replay()
            graphs[1].replay()

        try:
            return record_spans(once, replays, all_ranks_agree, dist.barrier)
        except ProfilerUnavailable as error:  # no CUPTI here: the timings still stand
            return f"profiler failed on rank {dist.get_rank()}: {error}"


def all_ranks_agree(flag: bool) -> bool:
    """True on every rank when `flag` is true on every rank."""
    value = torch.tensor([1 if flag else 0], device="cuda")
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return bool(value.item())


def all_ranks_max(value: int) -> int:
    """The largest `value` of any rank, on every rank."""
    tensor = torch.tensor([value], device="cuda")
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def _medians(marks) -> dict[str, float]:
    spans = {"dispatch_us": (0, 1), "combine_us": (1, 2), "round_trip_us": (0, 2)}
    return {
        name: round(statistics.median(m[a].elapsed_time(m[b]) * 1e3 for m in marks), 2)
        for name, (a, b) in spans.items()
    }


def rows_per_ffn(topk: torch.Tensor, ffn_ranks: int, experts_per_ffn: int) -> list[int]:
    """How many tokens route to each FFN rank (a token counts once per FFN rank)."""
    return [
        int(((topk >= f * experts_per_ffn) & (topk < (f + 1) * experts_per_ffn)).any(dim=1).sum())
        for f in range(ffn_ranks)
    ]


@dataclass(frozen=True)
class ExchangeSizes:
    """Bytes to and from each rank for all_to_all_single, out and back."""

    send: list[int]
    receive: list[int]
    back_send: list[int]
    back_receive: list[int]


def exchange_sizes(
    rank: int, attention: int, routed: list[list[int]], row_bytes: int, hidden: int
) -> ExchangeSizes:
    """`routed[p]`: the rows source p sends each FFN rank (every source's, so
    each side knows what it receives). Out: a payload row per (token, FFN
    rank); back: one bf16 row of `hidden` per row received."""
    ffn_ranks = len(routed[0])
    world = attention + ffn_ranks
    send, receive = [0] * world, [0] * world
    if rank < attention:
        send = [0] * attention + [n * row_bytes for n in routed[rank]]
    else:
        receive = [routed[p][rank - attention] * row_bytes for p in range(attention)]
        receive += [0] * ffn_ranks
    back_send = [r // row_bytes * hidden * 2 for r in receive]
    back_receive = [s // row_bytes * hidden * 2 for s in send]
    return ExchangeSizes(send, receive, back_send, back_receive)


def nccl_round_trip(source, args, iters: int, warmup: int) -> dict[str, float]:
    """The same exchange through all_to_all_single: every routed token's row to
    each FFN rank it names, then one bf16 row back per (token, FFN rank). The
    sources' counts are gathered first: each source draws its own routes."""
    rank, world = dist.get_rank(), dist.get_world_size()
    attention = world - args.ffn_ranks
    row_bytes = source.x[0].numel() * source.x.element_size() + (
        0 if source.x_scales is None else source.x_scales[0].numel() * 4
    )
    topk = source.topk_idx[: source.num_tokens]
    mine = rows_per_ffn(topk, args.ffn_ranks, args.num_experts // args.ffn_ranks)
    routed: list = [None] * world
    dist.all_gather_object(routed, mine)
    sizes = exchange_sizes(rank, attention, routed[:attention], row_bytes, args.hidden_size)
    send, receive = sizes.send, sizes.receive
    back_send, back_receive = sizes.back_send, sizes.back_receive
    dev = torch.device("cuda", torch.cuda.current_device())
    tensors = [
        torch.zeros(max(sum(split), 1), dtype=torch.uint8, device=dev)
        for split in (send, receive, back_send, back_receive)
    ]

    def exchange():
        dist.all_to_all_single(tensors[1][: sum(receive)], tensors[0][: sum(send)], receive, send)
        dist.all_to_all_single(
            tensors[3][: sum(back_receive)], tensors[2][: sum(back_send)], back_receive, back_send
        )

    return round_trip_us(exchange, iters, warmup)


def peer_copy(
    nbytes: int, peer_view: torch.Tensor, local: torch.Tensor, iters: int, warmup: int
) -> dict[str, float]:
    """A plain copy of `nbytes` into the peer's memory (NVLink), from rank 0."""
    if nbytes == 0:
        return {"copy_us": 0.0, "gb_per_s": 0.0}
    for _ in range(warmup):
        peer_view[:nbytes].copy_(local[:nbytes])
    torch.cuda.synchronize()
    marks = []
    for _ in range(iters):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        peer_view[:nbytes].copy_(local[:nbytes])
        end.record()
        marks.append((begin, end))
    torch.cuda.synchronize()
    us = statistics.median(b.elapsed_time(e) * 1e3 for b, e in marks)
    return {"copy_us": round(us, 2), "gb_per_s": round(nbytes / us / 1e3, 1)}


def trace_lines(title: str, spans: list, replays: int) -> list[str]:
    """Every rank's spans aligned on rank 0's (lines on rank 0 only)."""
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, spans)
    if dist.get_rank() != 0:
        return []
    failures = [spans for spans in gathered if isinstance(spans, str)]
    if failures:
        return [f"## {title}", f"trace unavailable: {failures[0]}"]
    try:
        return aligned_lines(title, gathered, replays)
    except ValueError as error:  # reported beside the timings, never fatal
        return [f"## {title}", f"trace unavailable: {error}"]


def bucket_inputs(rank: int, bucket: int, geometry, device) -> SourceInputs:
    """This rank's inputs at `bucket` tokens: routes drawn for each source rank
    from (seed, bucket, rank), as a real batch's would differ per rank."""
    return inputs_of(geometry, rank=rank, step=bucket, seed=1, num_tokens=bucket, device=device)


def measure_bucket(args, bucket: int, timers, results, traces, copy, gemm) -> None:
    """Every arm at `bucket` (its traces and its overlap screen where asked),
    then the references: NCCL, the NCCL pipeline, the peer copy."""
    rank, key = dist.get_rank(), str(bucket)
    geometry = next(iter(timers.values())).buffer.geometry
    device = torch.device("cuda", torch.cuda.current_device())
    source = bucket_inputs(rank, bucket, geometry, device)
    for name in args.order:
        timer = timers[name]
        timer.load(source)
        results[name][key] = timer.time(args.iters, args.warmup)
        if bucket in args.trace_buckets:
            traces[f"{name}-t{bucket}"] = trace_lines(
                f"{name} T={bucket}", timer.trace(args.trace_replays), args.trace_replays
            )
        if bucket in args.overlap_buckets:
            results["overlap"].setdefault(name, {})[key] = overlap_us(
                timer.replay_once,
                *gemm,
                args.overlap_gemms,
                args.overlap_repeats,
                dist.barrier,
                all_ranks_max,
            )
    results["nccl"][key] = nccl_round_trip(source, args, args.iters, args.warmup)
    if geometry.payload == "bf16":  # the pipeline reference moves bf16 rows only
        results["nccl_pipeline"][key] = nccl_pipeline_round_trip(
            source, args, args.iters, args.warmup
        )
    if rank == 0:
        nbytes = bucket * geometry.row_bytes
        results["peer_copy"][key] = peer_copy(nbytes, *copy, args.iters, args.warmup)
    dist.barrier()


def main(argv=None) -> int:
    import torch.distributed._symmetric_memory as symm_mem

    args = parse_args(argv)
    arms = json.loads(args.arms)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank = dist.get_rank()
    timers = {
        name: ArmTimer(args, arm_config(arms[name]), arm_attentions(arms[name]))
        for name in args.order
    }
    geometry = next(iter(timers.values())).buffer.geometry
    dev = torch.device("cuda", local_rank)
    largest = geometry.capacity * geometry.row_bytes
    copy_buffer = symm_mem.empty(largest, dtype=torch.uint8, device=dev)
    handle = symm_mem.rendezvous(copy_buffer, dist.group.WORLD.group_name)
    peer_view = handle.get_buffer(geometry.num_attention, [largest], torch.uint8)
    local = torch.randint(0, 255, (largest,), dtype=torch.uint8, device=dev)
    results: dict[str, dict] = {name: {} for name in args.order}
    for reference in ("nccl", "nccl_pipeline", "peer_copy", "overlap"):
        results[reference] = {}
    traces: dict[str, list[str]] = {}
    gemm = gemm_operands(*args.overlap_gemm, dev) if args.overlap_buckets else None
    for bucket in args.buckets:
        measure_bucket(args, bucket, timers, results, traces, (peer_view, local), gemm)
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(
        gathered, {"rank": rank, "role": timers[args.order[0]].buffer.role, "results": results}
    )
    if rank == 0:
        document = {
            "order": args.order,
            "native_source_sha256": afdep.source_digest(),
            "arm_digests": {
                name: afdep.source_digest(arm_attentions(arms[name]) or CSRC) for name in args.order
            },
            "row_bytes": geometry.row_bytes,
            "ranks": gathered,
            "traces": traces,
        }
        print(f"{BENCH} {json.dumps(document)}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
