"""ffn_expand alone, on one GPU in the one-GPU logical mode (1A:1F, payload-first).

    python -m tools.bench.expand [--tree DIR]... [--tokens N...] [--ctas N]...
                                 [--iters 50] [--warmup 10] [--reps 20]
                                 [--results-dir results]

Per kernel tree, token count and grid (AFDEP_EXPAND_SMS): one step gives
ffn_expand its slots and the FFN rank's dispatch output is checked bitwise
against the reference (invariants/data/reference.py); then a CUDA graph of
`--reps` ffn_expand launches at that step's epoch (each finds every row
landed and writes the same output again) is replayed, `--warmup` times
untimed, `--iters` times between CUDA events, and the median per launch is
reported; the output is checked again after the timed launches. Beside each
time: the bytes it reads (a routed token's slot row and metadata) and writes
(a row per routed (token, expert)) and their time at HBM bandwidth. Writes
`expand-<machine>.json` and `.md` under --results-dir.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from afdep.workspace import Geometry
from hostio import OneLineParser
from tools.bench import micro, micro_step
from tools.bench.micro import (
    NUM_SMS,
    PROTOCOL_KNOB,
    CardBounds,
    bound_us,
    gbps,
    geometry,
    hbm_rate,
)
from tools.bench.timing import graph_launch_us

PROG = "python -m tools.bench.expand"


def notes(bounds: CardBounds) -> list[str]:
    """The report's note on its bound, at `bounds` (the card that ran)."""
    hbm = (
        f"HBM bound: the read and written bytes at {hbm_rate(bounds)} ({bounds.hbm_source}); "
        "logical mode: the slots were written by a rank on this GPU, as NVLink would leave them"
    )
    return [hbm]


@dataclass(frozen=True)
class Traffic:
    """What one ffn_expand moves at 1A:1F: each routed token's slot (row and
    metadata) read once, one row written per (token, expert) pair."""

    tokens_read: int
    rows_written: int
    g: Geometry

    @property
    def read_bytes(self) -> int:
        return self.tokens_read * (self.g.row_bytes + self.g.slot_meta_bytes)

    @property
    def written_bytes(self) -> int:
        return self.rows_written * self.g.row_bytes


def traffic_of(topk_idx, num_tokens: int, g: Geometry) -> Traffic:
    routed = topk_idx[:num_tokens] >= 0
    return Traffic(int(routed.any(dim=1).sum()), int(routed.sum()), g)


def row_figures(traffic: Traffic, us: float, bounds: CardBounds) -> dict:
    """A result row's byte and bandwidth figures at `bounds`, rounded as reported."""
    moved = traffic.read_bytes + traffic.written_bytes
    return {
        "read_bytes": traffic.read_bytes,
        "written_bytes": traffic.written_bytes,
        "gbps": round(gbps(moved, us), 1),
        "hbm_bound_us": round(bound_us(moved, bounds.hbm_gbps), 2),
    }


# ---------------------------------------------------------------- arguments
def argument_parser() -> OneLineParser:
    grid = f"ffn_expand's grid cap (AFDEP_EXPAND_SMS); repeatable; default: {NUM_SMS} and "
    grid += "every SM the FFN rank can hold"
    return micro.grid_argument_parser(PROG, __doc__, grid)


def checked_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The parsed arguments, or UsageError naming the first bad one."""
    return micro.checked_grid_arguments(argument_parser(), argv)


# ---------------------------------------------------------------- on the GPU
def measure(tree: Path, tokens: int, ctas: int | None, args, bounds: CardBounds) -> dict:
    """One row: ffn_expand of `tree` at `tokens` on at most `ctas` CTAs
    (None: the Buffer's default), checked, timed, checked again, beside the
    bound of this card (`bounds`)."""
    import torch

    g = geometry(tokens)
    environ = {k: v for k, v in os.environ.items() if k != PROTOCOL_KNOB}
    if ctas is not None:
        environ["AFDEP_EXPAND_SMS"] = str(ctas)
    ranks, attention, ffn, sources = micro_step.stepped(tree, tokens, g, environ)
    _, before = ffn.check(sources, step=tokens, num_tokens=tokens)
    expansion = ranks.buffers[1]
    grid = expansion.expand_ctas[expansion.protocol_for(tokens)]
    us = graph_launch_us(partial(expansion.expand_again, tokens), ranks.streams[1], args)
    torch.cuda.synchronize()
    _, after = ffn.check(sources, step=tokens, num_tokens=tokens)
    traffic = traffic_of(sources[0].topk_idx, tokens, g)
    del ranks, attention, ffn, expansion
    return micro_step.finished_row(
        tree,
        tokens,
        before + after,
        ctas=grid,
        us=round(us, 2),
        **row_figures(traffic, us, bounds),
    )


# ---------------------------------------------------------------- report
TABLE_HEAD = (
    "| tree | tokens | CTAs | µs | read MiB | written MiB | GB/s | HBM bound µs | bitwise |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---|",
)


def table_lines(document: dict) -> list[str]:
    """The Markdown report: the trees, one row per measurement, the bound's note."""
    cells = lambda row: f"{micro.grid_cells(row)} | {row['hbm_bound_us']:.2f}"
    return micro.table_lines(document, "ffn_expand", TABLE_HEAD, cells)


def run(args: argparse.Namespace) -> int:
    document = micro.start(args, notes)
    micro.measure_grids(document, args, args.ctas or [NUM_SMS, None], measure)
    return micro.finish(document, "expand", args.results_dir, table_lines)


main = micro.program(PROG, checked_arguments, run)


if __name__ == "__main__":
    sys.exit(main())
