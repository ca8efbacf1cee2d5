"""Per-kernel start/end traces for the bench, as the count-first validation printed them: each
device's kernels over a few graph replays (CUPTI through torch.profiler; no
kernel change), aligned on the attention rank's first kernel of each replay
and reduced to medians.

    ## CF T=2048
    anchor rank 0 first kernel start = 0; period median 291.62 us
     rank0 0:attention_dispatch start 0.00 end 90.43 dur 90.43
     rank1 0:ffn_place start 0.41 end 88.10 dur 87.69
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable

Span = tuple[str, int, int]  # kernel name, start ns, end ns (one host clock for all ranks)


def short_name(name: str) -> str:
    """`void afdep::attention_dispatch<2048, 8, ...>(afdep::Params)` -> `attention_dispatch`."""
    base = re.sub(r"<.*", "", name).split("(")[0].split()[-1]
    return base.split("::")[-1]


def is_afdep_kernel(name: str) -> bool:
    return "afdep::" in name or "_ZN5afdep" in name


class ProfilerUnavailable(RuntimeError):
    """The profiler could not start on some rank; every rank raises it together."""


def record_spans(
    run_once: Callable[[], None],
    replays: int,
    all_agree: Callable[[bool], bool],
    start_together: Callable[[], None],
) -> list[Span]:
    """afdep's kernels over `replays` calls of `run_once`, in start order.
    `all_agree` (an all-reduce of a flag) tells every rank whether every
    profiler started, so no rank enters a collective the others skip;
    `start_together` (a barrier) then lines the ranks up. Their own kernels
    (NCCL's, a fill) are left out with anything else not afdep's. An error
    from `run_once` itself propagates: the timings would fail the same way."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    try:  # any failure to start (no CUPTI, a CPU build of torch) is the same news
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
        started, why = True, ""
    except Exception as error:
        started, why = False, f"{type(error).__name__}: {error}"
    if not all_agree(started):
        if started:
            prof.__exit__(None, None, None)
        raise ProfilerUnavailable(why or "the profiler failed on another rank")
    try:
        start_together()
        torch.cuda.synchronize()
        for _ in range(replays):
            run_once()
        torch.cuda.synchronize()
    finally:
        prof.__exit__(None, None, None)
    events = prof.profiler.kineto_results.events()
    spans = [
        (short_name(e.name()), e.start_ns(), e.end_ns())
        for e in events
        if e.device_type() == DeviceType.CUDA and is_afdep_kernel(e.name())
    ]
    return sorted(spans, key=lambda span: span[1])


def split_replays(spans: list[Span], replays: int, rank: int) -> list[list[Span]]:
    if not spans or len(spans) % replays:
        raise ValueError(
            f"rank {rank}: {len(spans)} GPU activities do not split into {replays} replays"
        )
    per = len(spans) // replays
    return [spans[i * per : (i + 1) * per] for i in range(replays)]


def keyed(replay: list[Span]) -> dict[tuple[str, int], Span]:
    """A replay's spans by (name, occurrence): kernels that start together
    (a PDL launch beside its primary) may swap places between replays."""
    seen: dict[str, int] = {}
    out = {}
    for span in replay:
        seen[span[0]] = seen.get(span[0], -1) + 1
        out[(span[0], seen[span[0]])] = span
    return out


def aligned_lines(title: str, spans_by_rank: list[list[Span]], replays: int) -> list[str]:
    """Median start/end of each rank's kernels, relative to rank 0's first
    kernel start in the same replay."""
    by_rank = [split_replays(spans, replays, rank) for rank, spans in enumerate(spans_by_rank)]
    anchors = [replay[0][1] for replay in by_rank[0]]
    periods = [(b - a) / 1e3 for a, b in zip(anchors, anchors[1:], strict=False)]
    period = f"{statistics.median(periods):.2f} us" if periods else "n/a (one replay)"
    lines = [f"## {title}", f"anchor rank 0 first kernel start = 0; period median {period}"]
    for rank, replays_of_rank in enumerate(by_rank):
        keyed_replays = [keyed(replay) for replay in replays_of_rank]
        rows = []
        for key in keyed_replays[0]:
            if any(key not in k for k in keyed_replays):
                raise ValueError(f"rank {rank}: kernel {key[0]} is missing from some replays")
            pairs = list(zip(keyed_replays, anchors, strict=True))
            start = statistics.median((k[key][1] - a) / 1e3 for k, a in pairs)
            end = statistics.median((k[key][2] - a) / 1e3 for k, a in pairs)
            rows.append((start, end, key[0]))
        for index, (start, end, name) in enumerate(sorted(rows)):
            lines.append(
                f" rank{rank} {index}:{name} start {start:.2f} end {end:.2f} dur {end - start:.2f}"
            )
    return lines
