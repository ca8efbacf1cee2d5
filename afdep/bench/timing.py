"""One timing loop for the bench's references: warm-up, a barrier, then each
call between two CUDA events; the median in µs."""

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
