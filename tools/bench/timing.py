"""The bench's timing loops: the references' (warm-up, a barrier, then each
call between two CUDA events) and the one-GPU micro-benches' (a CUDA graph of
repeated launches replayed between events); medians in µs."""

from __future__ import annotations

import statistics
from collections.abc import Callable


def round_trip_us(step: Callable[[], None], iters: int, warmup: int) -> dict[str, float]:
    import torch
    import torch.distributed as dist

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    marks = []
    for _ in range(iters):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        step()
        end.record()
        marks.append((begin, end))
    torch.cuda.synchronize()
    return {"round_trip_us": round(statistics.median(b.elapsed_time(e) * 1e3 for b, e in marks), 2)}


def graph_launch_us(launch: Callable[[], None], stream, args) -> float:
    """The median µs of one `launch()`: a CUDA graph of `args.reps` of them on
    `stream`, replayed `args.warmup` times untimed, then `args.iters` times
    between CUDA events."""
    import torch

    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(args.reps):
                launch()
        for _ in range(args.warmup):
            graph.replay()
        samples = []
        for _ in range(args.iters):
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3 / args.reps)
    return statistics.median(samples)


def node_floor_us(args) -> float:
    """What one launch of a kernel that does nothing costs inside the same
    graph of `args.reps` (a one-element add_ on its own stream): the floor under
    every micro-bench row."""
    import torch

    one = torch.zeros(1, device="cuda")
    return graph_launch_us(lambda: one.add_(1), torch.cuda.Stream(), args)
