"""ffn_combine, then attention_combine, on one GPU in the logical mode (1A:1F).

    python -m tools.bench.combine [--tree DIR]... [--tokens N...] [--ctas N]...
                                  [--iters 50] [--warmup 10] [--reps 20]
                                  [--results-dir results]

Per kernel tree, token count and grid: one step (dispatch, expert function,
combine) gives ffn_combine its inputs; then a CUDA graph of `--reps`
ffn_combine launches is replayed, `--warmup` times untimed, `--iters` times
between CUDA events, and the median per launch is reported. The attention
rank's combine (attention_combine) is then timed the same way over the last
timed launch's partials (their flags are this step's, so each launch passes
its waits at once and writes the same output), and that output is checked
bitwise against the reference (invariants/data/reference.py).

In logical mode the partials land in this GPU's HBM, not over NVLink: the
NVLink write bound beside each row is what a rank per GPU would add. Writes
`combine-<machine>.json` and `.md` under --results-dir.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from hostio import OneLineParser
from tools.bench import micro, micro_step
from tools.bench.micro import (
    HIDDEN,
    NUM_SMS,
    CardBounds,
    bound_us,
    gbps,
    geometry,
    hbm_rate,
    nvlink_rate,
)
from tools.bench.timing import graph_launch_us

PROG = "python -m tools.bench.combine"
BF16_BYTES = 2


def notes(bounds: CardBounds) -> list[str]:
    """The report's notes on its bounds, at `bounds` (the card that ran)."""
    hbm = f"HBM read bound: the read bytes at {hbm_rate(bounds)} ({bounds.hbm_source})"
    logical = (
        "logical mode: the partials land in this GPU's HBM, not over NVLink; the NVLink "
        f"write bound is the written bytes at {nvlink_rate(bounds)} "
        f"({bounds.nvlink_source}), what a rank per GPU adds"
    )
    attention = (
        "attention_combine: the partials read (one per routed token at 1A:1F) and the rows "
        f"written (one per token), at {hbm_rate(bounds)}: in both rank modes the partials "
        "sit in the attention rank's own HBM"
    )
    return [hbm, logical, attention]


@dataclass(frozen=True)
class Traffic:
    """What one ffn_combine moves: every unmasked top-k row of y read once,
    one bf16 partial written per token routed to the FFN rank."""

    rows_read: int
    tokens_written: int
    hidden: int
    num_tokens: int = 0  # the attention rank's rows, each written by attention_combine

    @property
    def read_bytes(self) -> int:
        return self.rows_read * self.hidden * BF16_BYTES

    @property
    def written_bytes(self) -> int:
        return self.tokens_written * self.hidden * BF16_BYTES

    @property
    def attention_bytes(self) -> int:
        """What attention_combine moves: every partial read, every row written."""
        return self.written_bytes + self.num_tokens * self.hidden * BF16_BYTES


def traffic_of(topk_idx, num_tokens: int, hidden: int) -> Traffic:
    """The traffic of the combine of one attention rank's routes at 1A:1F
    (every expert on the one FFN rank)."""
    routed = topk_idx[:num_tokens] >= 0
    return Traffic(int(routed.sum()), int(routed.any(dim=1).sum()), hidden, num_tokens)


def row_figures(traffic: Traffic, us: float, bounds: CardBounds) -> dict:
    """A result row's byte and bandwidth figures at `bounds`, rounded as reported."""
    moved = traffic.read_bytes + traffic.written_bytes
    return {
        "read_bytes": traffic.read_bytes,
        "written_bytes": traffic.written_bytes,
        "gbps": round(gbps(moved, us), 1),
        "hbm_read_bound_us": round(bound_us(traffic.read_bytes, bounds.hbm_gbps), 2),
        "nvlink_write_bound_us": round(
            bound_us(traffic.written_bytes, bounds.nvlink_gbps_per_direction), 2
        ),
    }


def attention_figures(traffic: Traffic, attention_us: float, bounds: CardBounds) -> dict:
    """attention_combine's time beside its HBM bound at `bounds`, rounded as reported."""
    return {
        "attention_us": round(attention_us, 2),
        "attention_hbm_bound_us": round(bound_us(traffic.attention_bytes, bounds.hbm_gbps), 2),
    }


# ---------------------------------------------------------------- arguments
def argument_parser() -> OneLineParser:
    grid = "ffn_combine's grid (AFDEP_COMBINE_SMS); repeatable; default: 24 and every SM"
    return micro.grid_argument_parser(PROG, __doc__, grid)


def checked_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The parsed arguments, or UsageError naming the first bad one."""
    return micro.checked_grid_arguments(argument_parser(), argv)


# ---------------------------------------------------------------- on the GPU
def measure(tree: Path, tokens: int, ctas: int, args, bounds: CardBounds) -> dict:
    """One row: ffn_combine of `tree` at `tokens` on `ctas` CTAs, timed and
    checked, beside the bounds of this card (`bounds`)."""
    import torch

    g = geometry(tokens)
    environ = {**os.environ, "AFDEP_COMBINE_SMS": str(ctas)}
    ranks, attention, ffn, sources = micro_step.stepped(tree, tokens, g, environ)
    us = graph_launch_us(ffn._combine, ranks.streams[1], args)
    attention_us = graph_launch_us(attention._combine, ranks.streams[0], args)
    torch.cuda.synchronize()
    _, mismatches = attention.check(sources, step=tokens, num_tokens=tokens)
    traffic = traffic_of(sources[0].topk_idx, tokens, HIDDEN)
    del ranks, attention, ffn
    return micro_step.finished_row(
        tree,
        tokens,
        mismatches,
        ctas=ctas,
        us=round(us, 2),
        **row_figures(traffic, us, bounds),
        **attention_figures(traffic, attention_us, bounds),
    )


# ---------------------------------------------------------------- report
TABLE_HEAD = (
    "| tree | tokens | CTAs | µs | read MiB | written MiB | GB/s | HBM read bound µs "
    "| NVLink write bound µs | attention_combine µs | its HBM bound µs | bitwise |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
)


def row_cells(row: dict) -> str:
    return (
        f"{micro.grid_cells(row)} | {row['hbm_read_bound_us']:.2f} "
        f"| {row['nvlink_write_bound_us']:.2f} | {row['attention_us']:.2f} "
        f"| {row['attention_hbm_bound_us']:.2f}"
    )


def table_lines(document: dict) -> list[str]:
    """The Markdown report: the trees, one row per measurement, the bounds' notes."""
    title = "ffn_combine, then attention_combine"
    return micro.table_lines(document, title, TABLE_HEAD, row_cells)


def run(args: argparse.Namespace) -> int:
    document = micro.start(args, notes)
    import torch

    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    micro.measure_grids(document, args, args.ctas or sorted({NUM_SMS, sm_count}), measure)
    return micro.finish(document, "combine", args.results_dir, table_lines)


main = micro.program(PROG, checked_arguments, run)


if __name__ == "__main__":
    sys.exit(main())
