"""ffn_combine alone, on one GPU in the one-GPU logical mode (1A:1F).

    python -m afdep.bench.combine [--tree DIR]... [--tokens N...] [--ctas N]...
                                  [--iters 50] [--warmup 10] [--reps 20]
                                  [--results-dir results]

Per kernel tree, token count and grid: one step (dispatch, expert function,
combine) gives ffn_combine its inputs; then a CUDA graph of `--reps`
ffn_combine launches is replayed, `--warmup` times untimed, `--iters` times
between CUDA events, and the median per launch is reported. The attention
rank's combine then runs once more over the last timed launch's partials and
its output is checked bitwise against the reference (afdep/testing/reference.py).

In logical mode the partials land in this GPU's HBM, not over NVLink: the
NVLink write bound beside each row is what a rank per GPU would add. Writes
`combine-<machine>.json` and `.md` under --results-dir.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from afdep.bench.timing import graph_launch_us
from afdep.config import environment_error
from afdep.jit import CSRC, source_digest
from afdep.workspace import Geometry, GeometryError
from hostio import OneLineParser, UsageError, at_least, entry_point, write_json, write_text
from hostio.usage import writable_dir

HIDDEN, TOP_K, NUM_EXPERTS, NUM_SMS = 2048, 8, 128, 24  # the bench's geometry (afdep.bench)
DEFAULT_TOKENS = (128, 512, 1024, 2048, 4096)
BUFFER_FIELDS = (
    "num_experts",
    "hidden",
    "capacity",
    "top_k",
    "ffn_ranks",
    "num_sms",
)  # Geometry's, as Buffer takes them
BF16_BYTES = 2
# H200 datasheet (NVIDIA H200 Tensor Core GPU): HBM3e 4.8 TB/s; NVLink 900 GB/s
# bidirectional, so 450 GB/s each way.
HBM_GBPS = 4800
NVLINK_GBPS_PER_DIRECTION = 450
HOST_INTERFACE = ("common/params.cuh", "common/layout.cuh")  # what the host side reads
LOGICAL_NOTE = (
    "logical mode: the partials land in this GPU's HBM, not over NVLink; the NVLink "
    f"write bound is the written bytes at {NVLINK_GBPS_PER_DIRECTION} GB/s per direction "
    "(H200 datasheet: 900 GB/s bidirectional), what a rank per GPU adds"
)
HBM_NOTE = f"HBM read bound: the read bytes at {HBM_GBPS / 1000} TB/s (H200 datasheet, HBM3e)"


@dataclass(frozen=True)
class Traffic:
    """What one ffn_combine moves: every unmasked top-k row of y read once,
    one bf16 partial written per token routed to the FFN rank."""

    rows_read: int
    tokens_written: int
    hidden: int

    @property
    def read_bytes(self) -> int:
        return self.rows_read * self.hidden * BF16_BYTES

    @property
    def written_bytes(self) -> int:
        return self.tokens_written * self.hidden * BF16_BYTES


def gbps(num_bytes: int, us: float) -> float:
    """Bytes per microsecond over 1000: GB/s (10^9 bytes per second)."""
    return num_bytes / (us * 1e3)


def bound_us(num_bytes: int, rate_gbps: float) -> float:
    """The time `num_bytes` take at `rate_gbps` GB/s, in µs."""
    return num_bytes / (rate_gbps * 1e3)


def traffic_of(topk_idx, num_tokens: int, hidden: int) -> Traffic:
    """The traffic of the combine of one attention rank's routes at 1A:1F
    (every expert on the one FFN rank)."""
    routed = topk_idx[:num_tokens] >= 0
    return Traffic(int(routed.sum()), int(routed.any(dim=1).sum()), hidden)


def row_figures(traffic: Traffic, us: float) -> dict:
    """A result row's byte and bandwidth figures, rounded as reported."""
    moved = traffic.read_bytes + traffic.written_bytes
    return {
        "read_bytes": traffic.read_bytes,
        "written_bytes": traffic.written_bytes,
        "gbps": round(gbps(moved, us), 1),
        "hbm_read_bound_us": round(bound_us(traffic.read_bytes, HBM_GBPS), 2),
        "nvlink_write_bound_us": round(
            bound_us(traffic.written_bytes, NVLINK_GBPS_PER_DIRECTION), 2
        ),
    }


# ---------------------------------------------------------------- arguments
def argument_parser() -> OneLineParser:
    parser = OneLineParser(prog="python -m afdep.bench.combine", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tree",
        action="append",
        type=Path,
        default=None,
        help="a kernel source tree (an afdep/csrc); repeatable; default: this package's",
    )
    parser.add_argument("--tokens", type=at_least(1), nargs="+", default=list(DEFAULT_TOKENS))
    parser.add_argument(
        "--ctas",
        action="append",
        type=at_least(1),
        default=None,
        help="ffn_combine's grid (AFDEP_COMBINE_SMS); repeatable; default: 24 and every SM",
    )
    parser.add_argument("--iters", type=at_least(1), default=50)
    parser.add_argument("--warmup", type=at_least(0), default=10)
    parser.add_argument("--reps", type=at_least(1), default=20, help="launches per graph replay")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    return parser


def tree_problem(tree: Path) -> str | None:
    """Why `tree` cannot be built and driven by this package's host side."""
    if not (tree / "impls").is_dir():
        return f"--tree {tree}: holds no kernel sources (no impls/ folder)"
    for interface in HOST_INTERFACE:
        theirs = tree / interface
        if not theirs.is_file() or theirs.read_bytes() != (CSRC / interface).read_bytes():
            return (
                f"--tree {tree}: {interface} differs from this package's (its host side reads it)"
            )
    return None


def geometry(tokens: int) -> Geometry:
    return Geometry(
        world_size=2,
        ffn_ranks=1,
        num_experts=NUM_EXPERTS,
        capacity=tokens,
        hidden=HIDDEN,
        top_k=TOP_K,
        num_sms=NUM_SMS,
    )


def checked_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The parsed arguments, or UsageError naming the first bad one."""
    args = argument_parser().parse_args(argv)
    problem = environment_error()
    if problem:
        raise UsageError(problem)
    args.tree = [tree.resolve() for tree in args.tree or [CSRC]]
    for tree in args.tree:
        problem = tree_problem(tree)
        if problem:
            raise UsageError(problem)
    if len(set(args.tree)) != len(args.tree):
        raise UsageError("--tree: a tree is named twice")
    for tokens in args.tokens:
        try:
            geometry(tokens)
        except GeometryError as error:
            raise UsageError(f"--tokens {tokens}: {error}") from None
    writable_dir(args.results_dir, "--results-dir")
    return args


# ---------------------------------------------------------------- on the GPU
def measure(tree: Path, tokens: int, ctas: int, args) -> dict:
    """One row: ffn_combine of `tree` at `tokens` on `ctas` CTAs, timed and checked."""
    import torch

    from afdep.bench.worker import bucket_inputs
    from afdep.logical import logical_ranks
    from afdep.testing.logical_steps import LogicalStepper
    from afdep.testing.steps import StepRunner

    g = geometry(tokens)
    environ = {**os.environ, "AFDEP_COMBINE_SMS": str(ctas)}
    ranks = logical_ranks(
        2, environs=[environ] * 2, sources=tree, **{k: getattr(g, k) for k in BUFFER_FIELDS}
    )
    attention, ffn = (StepRunner(buffer, graph=False) for buffer in ranks.buffers)
    device = ranks.buffers[0].device
    sources = [bucket_inputs(0, tokens, g, device)]
    LogicalStepper([attention, ffn], ranks.streams, graph=False).step(sources, bucket=tokens)
    torch.cuda.synchronize()
    us = graph_launch_us(ffn._combine, ranks.streams[1], args)
    with torch.cuda.stream(ranks.streams[0]):
        attention._combine()  # over the last timed launch's partials
    torch.cuda.synchronize()
    _, mismatches = attention.check(sources, step=tokens, num_tokens=tokens)
    traffic = traffic_of(sources[0].topk_idx, tokens, HIDDEN)
    del ranks, attention, ffn
    gc.collect()  # the next build's workspace takes this one's memory
    torch.cuda.empty_cache()
    return {
        "tree": str(tree),
        "tokens": tokens,
        "ctas": ctas,
        "us": round(us, 2),
        **row_figures(traffic, us),
        "bitwise": not mismatches,
        "mismatch": mismatches[0] if mismatches else None,
    }


# ---------------------------------------------------------------- report
def table_lines(document: dict) -> list[str]:
    """The Markdown report: the trees, one row per measurement, the bounds' notes."""
    lines = [f"# ffn_combine, {document['rank_mode']}", ""]
    lines += [
        f"- tree `{tree}`: source digest `{digest}`" for tree, digest in document["trees"].items()
    ]
    lines += [
        "",
        "| tree | tokens | CTAs | µs | read MiB | written MiB | GB/s | HBM read bound µs "
        "| NVLink write bound µs | bitwise |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    names = {tree: f"#{i}" for i, tree in enumerate(document["trees"])}
    for row in document["rows"]:
        lines.append(
            f"| {names[row['tree']]} | {row['tokens']} | {row['ctas']} | {row['us']:.2f} "
            f"| {row['read_bytes'] / 2**20:.2f} | {row['written_bytes'] / 2**20:.2f} "
            f"| {row['gbps']:.1f} | {row['hbm_read_bound_us']:.2f} "
            f"| {row['nvlink_write_bound_us']:.2f} | {'ok' if row['bitwise'] else 'MISMATCH'} |"
        )
    return [*lines, "", f"- {HBM_NOTE}", f"- {LOGICAL_NOTE}"]


def run(args: argparse.Namespace) -> int:
    from afdep.testing.logical import CONNECTIONS

    for name, value in CONNECTIONS.items():
        os.environ.setdefault(name, value)  # read when CUDA starts, below
    import torch

    from afdep.ranks import RankMode, rank_mode_label
    from hostio import machine_name

    if torch.cuda.device_count() < 1:
        raise UsageError("needs a GPU, found 0")
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    grids = args.ctas or sorted({NUM_SMS, sm_count})
    document = {
        "machine": machine_name(),
        "rank_mode": rank_mode_label(RankMode.LOGICAL, 2, torch.cuda.get_device_name()),
        "geometry": {"shape": "1A:1F", "hidden": HIDDEN, "top_k": TOP_K, "payload": "bf16"},
        "trees": {str(tree): source_digest(tree) for tree in args.tree},
        "timing": {"iters": args.iters, "warmup": args.warmup, "reps": args.reps},
        "bounds": {"hbm_gbps": HBM_GBPS, "nvlink_gbps_per_direction": NVLINK_GBPS_PER_DIRECTION},
        "notes": [HBM_NOTE, LOGICAL_NOTE],
        "rows": [],
    }
    for tokens in args.tokens:
        for ctas in grids:
            for tree in args.tree:
                row = measure(tree, tokens, ctas, args)
                document["rows"].append(row)
                print(f"{tree} tokens={tokens} ctas={ctas}: {row['us']} us", flush=True)
    stem = args.results_dir / f"combine-{document['machine']}"
    write_json(stem.with_suffix(".json"), document)
    write_text(stem.with_suffix(".md"), "\n".join(table_lines(document)) + "\n")
    print("\n".join(table_lines(document)))
    return 0 if all(row["bitwise"] for row in document["rows"]) else 1


@entry_point
def main(argv: list[str] | None = None) -> int:
    try:
        return run(checked_arguments(argv))
    except UsageError as error:
        print(f"python -m afdep.bench.combine: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
