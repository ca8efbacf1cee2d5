"""The attention rank's dispatch alone (attention_route, attention_dispatch),
on one GPU in the one-GPU logical mode (1A:1F).

    python -m tools.bench.dispatch [--tree DIR]... [--tokens N...] [--capacity C]
                                   [--protocol P]... [--iters 50] [--warmup 10]
                                   [--reps 20] [--results-dir results]

Per kernel tree, token count and protocol (default payload-first; count-first
publishes each slot with its own release, the counts with one more), at one
capacity: one step (dispatch, expert function, combine) runs and the FFN
rank's dispatch output is checked bitwise against the reference
(invariants/data/reference.py); then a CUDA graph of `--reps` attention
dispatches (attention_route, which advances the epoch and checks and lays
out the routes, and attention_dispatch, which waits on nothing in either
protocol) is replayed, `--warmup` times untimed, `--iters` times between CUDA
events, and the median per dispatch is reported. Few tokens at a large
capacity time the set-up (the route check of every row, the bitmaps, their
prefix sums) before a row moves. Beside
each time: the bytes the dispatch writes to the FFN rank (a row and its slot
metadata per routed token, and count-first's flag per slot) and the time
they take over NVLink, what a rank per GPU adds, with a kernel launch as the
floor below any size. Writes `dispatch-<machine>.json` and `.md` under
--results-dir.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path

from afdep.config import COUNT_FIRST_EVERY_BUCKET
from afdep.vocab import Protocol
from afdep.workspace import Geometry, GeometryError
from hostio import OneLineParser, UsageError, at_least
from tools.bench import micro, micro_step
from tools.bench.micro import (
    NUM_SMS,
    PROTOCOL_KNOB,
    CardBounds,
    bound_us,
    geometry,
    nvlink_rate,
)
from tools.bench.timing import graph_launch_us

PROG = "python -m tools.bench.dispatch"
SLOT_FLAG_BYTES = 8  # a u64 epoch per slot (common/layout.cuh)
DEFAULT_TOKENS = (1, 128, 512, 2048, 4096)
DEFAULT_CAPACITY = 4096


def notes(bounds: CardBounds) -> list[str]:
    """The report's note on its timing and its bound, at `bounds` (the card that ran)."""
    timing = (
        "each dispatch is attention_route (the epoch's increment, the routes' check and maps) "
        f"and attention_dispatch on {NUM_SMS} CTAs; 'without the kernel': the same launch, "
        "the epoch's increment alone "
        "(skip_send); logical mode: the rows land in this GPU's HBM, not over NVLink; "
        f"the NVLink write bound is the written bytes at {nvlink_rate(bounds)} "
        f"({bounds.nvlink_source})"
    )
    return [timing]


def protocol_word(text: str) -> Protocol:
    try:
        return Protocol(text)
    except ValueError:
        words = ", ".join(str(p) for p in Protocol)
        raise argparse.ArgumentTypeError(f"one of {words}, got {text!r}") from None


def argument_parser() -> OneLineParser:
    parser = micro.argument_parser(PROG, __doc__, DEFAULT_TOKENS, "dispatches")
    parser.add_argument("--capacity", type=at_least(1), default=DEFAULT_CAPACITY)
    parser.add_argument(
        "--protocol",
        type=protocol_word,
        action="append",
        default=None,
        help="payload-first (default) and/or count-first",
    )
    return parser


def written_bytes(topk_idx, num_tokens: int, g: Geometry, protocol: Protocol) -> int:
    """What one dispatch writes to the one FFN rank: a row and its slot
    metadata per token routed anywhere, and count-first's 8-byte flag per slot
    (the counts and the done counter aside)."""
    routed = int((topk_idx[:num_tokens] >= 0).any(dim=1).sum())
    flag = SLOT_FLAG_BYTES if protocol is Protocol.COUNT_FIRST else 0
    return routed * (g.row_bytes + g.slot_meta_bytes + flag)


def checked_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The parsed arguments, or UsageError naming the first bad one."""
    args = argument_parser().parse_args(argv)
    micro.checked_common(args)
    args.protocol = list(dict.fromkeys(args.protocol or [Protocol.PAYLOAD_FIRST]))
    try:
        geometry(args.capacity)
    except GeometryError as error:
        raise UsageError(f"--capacity {args.capacity}: {error}") from None
    for tokens in args.tokens:
        if tokens > args.capacity:
            raise UsageError(f"--tokens {tokens}: more than --capacity {args.capacity}")
    return args


# ---------------------------------------------------------------- on the GPU
def protocol_environ(protocol: Protocol) -> dict[str, str]:
    """The ranks' environment: payload-first with the protocol knob left out,
    count-first at every bucket."""
    environ = {k: v for k, v in os.environ.items() if k != PROTOCOL_KNOB}
    return environ | (COUNT_FIRST_EVERY_BUCKET if protocol is Protocol.COUNT_FIRST else {})


def measure(tree: Path, tokens: int, protocol: Protocol, args, bounds: CardBounds) -> dict:
    """One row: attention_dispatch of `tree` at `tokens` in `protocol`,
    checked, then timed, beside the bound of this card (`bounds`)."""
    g = geometry(args.capacity)
    ranks, attention, ffn, sources = micro_step.stepped(tree, tokens, g, protocol_environ(protocol))
    _, mismatches = ffn.check(sources, step=tokens, num_tokens=tokens)
    us = graph_launch_us(attention._dispatch, ranks.streams[0], args)
    floor = graph_launch_us(partial(attention._dispatch, skip_send=True), ranks.streams[0], args)
    written = written_bytes(sources[0].topk_idx, tokens, g, protocol)
    del ranks, attention, ffn
    return micro_step.finished_row(
        tree,
        tokens,
        mismatches,
        protocol=str(protocol),
        capacity=args.capacity,
        us=round(us, 2),
        floor_us=round(floor, 2),
        written_bytes=written,
        nvlink_write_bound_us=round(bound_us(written, bounds.nvlink_gbps_per_direction), 2),
    )


# ---------------------------------------------------------------- report
TABLE_HEAD = (
    "| tree | protocol | tokens | capacity | µs | without the kernel µs | written MiB "
    "| NVLink write bound µs | bitwise |",
    "|---|---|---:|---:|---:|---:|---:|---:|---|",
)


def row_cells(row: dict) -> str:
    return (
        f"{row.get('protocol', Protocol.PAYLOAD_FIRST)} "
        f"| {row['tokens']} | {row['capacity']} | {row['us']:.2f} "
        f"| {row['floor_us']:.2f} | {row['written_bytes'] / 2**20:.2f} "
        f"| {row['nvlink_write_bound_us']:.2f}"
    )


def table_lines(document: dict) -> list[str]:
    """The Markdown report: the trees, one row per measurement, the note."""
    title = "attention_route + attention_dispatch"
    return micro.table_lines(document, title, TABLE_HEAD, row_cells)


def run(args: argparse.Namespace) -> int:
    document = micro.start(args, notes)
    bounds = micro.document_bounds(document)
    for tokens in args.tokens:
        for protocol in args.protocol:
            for tree in args.tree:
                row = measure(tree, tokens, protocol, args, bounds)
                document["rows"].append(row)
                print(f"{tree} {protocol} tokens={tokens}: {row['us']} us", flush=True)
    return micro.finish(document, "dispatch", args.results_dir, table_lines)


main = micro.program(PROG, checked_arguments, run)


if __name__ == "__main__":
    sys.exit(main())
