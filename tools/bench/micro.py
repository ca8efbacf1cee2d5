"""What the one-GPU micro-benches (`combine`, `dispatch`, `expand`) share:
their 1A:1F geometry and the datasheet bounds of the card that runs them,
their arguments and checks,
the kernel trees they take, CUDA started for logical ranks, the report's
head, rows, tree lines, table and writing. Each bench keeps its own sizes,
figures and columns; the timing loop is `timing.graph_launch_us`."""

from __future__ import annotations

import argparse
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from afdep.jit import CSRC, source_digest
from afdep.ranks import RankFailure, RankFailures
from afdep.workspace import Geometry, GeometryError
from hostio import OneLineParser, UsageError, at_least, entry_point, write_json, write_text
from hostio.usage import writable_dir

HIDDEN, TOP_K, NUM_EXPERTS, NUM_SMS = 2048, 8, 128, 24  # the benches' geometry (tools.bench.arms)
GRID_TOKENS = (128, 512, 1024, 2048, 4096)  # the token counts a grid bench times by default
BUFFER_FIELDS = (
    "num_experts",
    "hidden",
    "capacity",
    "top_k",
    "ffn_ranks",
    "num_sms",
)  # Geometry's, as Buffer takes them
# What of a kernel tree the host side of this package reads, a tree must keep,
# per file: the part a pattern finds (`struct Params`, its fields in order; the
# layout's constants, slot metadata and row shape, which afdep/workspace.py
# mirrors), or the whole file (None). The device helpers beside them may change.
HOST_INTERFACE: dict[str, re.Pattern[str] | None] = {
    "common/params.cuh": re.compile(r"^struct Params \{.*?^\};", re.MULTILINE | re.DOTALL),
    "common/layout.cuh": re.compile(r"\A.*?^struct RowShape \{.*?^\};", re.MULTILINE | re.DOTALL),
}


def host_interface(tree: Path, interface: str) -> str | None:
    """The part of `interface` in `tree` that the host side reads (None: none)."""
    path = tree / interface
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    pattern = HOST_INTERFACE[interface]
    if pattern is None:
        return text
    found = pattern.search(text)
    return found.group(0) if found else None


def host_interface_differs(tree: Path) -> str | None:
    """The first of HOST_INTERFACE whose read part differs from this package's."""
    for interface in HOST_INTERFACE:
        theirs = host_interface(tree, interface)
        if theirs is None or theirs != host_interface(CSRC, interface):
            return interface
    return None


# Left out of the ranks' environment: payload-first, whose attention_dispatch
# waits on nothing and whose expansion is ffn_expand.
PROTOCOL_KNOB = "AFDEP_COUNT_FIRST_MIN_BUCKET"


def geometry(capacity: int) -> Geometry:
    """The benches' 1A:1F geometry at `capacity` (GeometryError if it cannot be)."""
    shape = {"num_experts": NUM_EXPERTS, "hidden": HIDDEN, "top_k": TOP_K, "num_sms": NUM_SMS}
    return Geometry(world_size=2, ffn_ranks=1, capacity=capacity, **shape)


def gbps(num_bytes: int, us: float) -> float:
    """Bytes per microsecond over 1000: GB/s (10^9 bytes per second)."""
    return num_bytes / (us * 1e3)


def bound_us(num_bytes: int, rate_gbps: float) -> float:
    """The time `num_bytes` take at `rate_gbps` GB/s, in µs."""
    return num_bytes / (rate_gbps * 1e3)


@dataclass(frozen=True)
class CardBounds:
    """A card's datasheet bounds, stated beside each time: its HBM bandwidth
    and its NVLink bandwidth each way (datasheets give both ways at once),
    each with where the figure comes from."""

    card: str  # as the report names it
    hbm_gbps: float
    nvlink_gbps_per_direction: float
    hbm_source: str
    nvlink_source: str


# Keyed by the name CUDA gives the card (torch.cuda.get_device_name()), exactly:
# other SKUs of the same GPU (an H100 of 94 or 64 GB, a GH200) have other figures.
DATASHEET_BOUNDS: dict[str, CardBounds] = {
    "NVIDIA H200": CardBounds(  # SXM; the H200 NVL's datasheet figures are the same
        card="H200",
        hbm_gbps=4800,
        nvlink_gbps_per_direction=450,
        hbm_source="H200 datasheet, HBM3e",
        nvlink_source="H200 datasheet: 900 GB/s bidirectional",
    ),
    "NVIDIA H100 80GB HBM3": CardBounds(
        card="H100 SXM",
        hbm_gbps=3350,
        nvlink_gbps_per_direction=450,
        hbm_source="H100 datasheet, SXM5 HBM3",
        nvlink_source="H100 datasheet, SXM5: 900 GB/s bidirectional",
    ),
    "NVIDIA H100 NVL": CardBounds(
        card="H100 NVL",
        hbm_gbps=3900,
        nvlink_gbps_per_direction=300,
        hbm_source="H100 datasheet, NVL HBM3",
        nvlink_source="H100 datasheet, NVL: NVLink bridge, 600 GB/s bidirectional",
    ),
    "NVIDIA H100 PCIe": CardBounds(
        card="H100 PCIe",
        hbm_gbps=2000,
        nvlink_gbps_per_direction=300,
        hbm_source="H100 datasheet, PCIe HBM2e",
        nvlink_source="H100 datasheet, PCIe: NVLink bridge, 600 GB/s bidirectional",
    ),
}


def card_bounds(device_name: str) -> CardBounds:
    """The datasheet bounds of the card CUDA names `device_name`, or
    UsageError naming it: a card missing from DATASHEET_BOUNDS gets no other
    card's figures."""
    bounds = DATASHEET_BOUNDS.get(device_name.strip())
    if bounds is None:
        known = ", ".join(DATASHEET_BOUNDS)
        raise UsageError(
            f"GPU {device_name!r}: no datasheet bounds in tools/bench/micro.py (known: {known})"
        )
    return bounds


def document_bounds(document: dict) -> CardBounds:
    """The bounds a report's head carries (`start` put them there)."""
    return CardBounds(**document["bounds"])


def hbm_rate(bounds: CardBounds) -> str:
    """The HBM bound's rate as the notes state it: `4.8 TB/s`."""
    return f"{bounds.hbm_gbps / 1000:g} TB/s"


def nvlink_rate(bounds: CardBounds) -> str:
    """The NVLink bound's rate as the notes state it: `450 GB/s per direction`."""
    return f"{bounds.nvlink_gbps_per_direction:g} GB/s per direction"


def tree_problem(tree: Path) -> str | None:
    """Why `tree` cannot be built and driven by this package's host side."""
    if not (tree / "impls").is_dir():
        return f"--tree {tree}: holds no kernel sources (no impls/ folder)"
    interface = host_interface_differs(tree)
    if interface is not None:
        return f"--tree {tree}: {interface} differs from this package's (its host side reads it)"
    return None


def argument_parser(prog: str, doc: str, tokens: tuple[int, ...], launch: str) -> OneLineParser:
    """The arguments every micro-bench takes: --tree, --tokens, the timing
    (--iters, --warmup, --reps: `launch`es per graph replay), --results-dir;
    a bench adds its own."""
    parser = OneLineParser(prog=prog, description=doc.split("\n")[0])
    parser.add_argument(
        "--tree",
        action="append",
        type=Path,
        default=None,
        help="a kernel source tree (an afdep/csrc); repeatable; default: this package's",
    )
    parser.add_argument("--tokens", type=at_least(1), nargs="+", default=list(tokens))
    parser.add_argument("--iters", type=at_least(1), default=50)
    parser.add_argument("--warmup", type=at_least(0), default=10)
    parser.add_argument("--reps", type=at_least(1), default=20, help=f"{launch} per graph replay")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    return parser


def grid_argument_parser(prog: str, doc: str, grid: str) -> OneLineParser:
    """argument_parser's arguments for a bench of launches over grids (at
    GRID_TOKENS unless told), and --ctas, its grids (repeatable; `grid` says
    what they set)."""
    parser = argument_parser(prog, doc, GRID_TOKENS, "launches")
    parser.add_argument("--ctas", action="append", type=at_least(1), default=None, help=grid)
    return parser


def checked_grid_arguments(parser: OneLineParser, argv: list[str] | None) -> argparse.Namespace:
    """A grid bench's arguments (each --tokens the capacity of its own
    geometry), or UsageError naming the first bad one."""
    args = parser.parse_args(argv)
    checked_common(args)
    checked_token_capacities(args.tokens)
    return args


def checked_token_capacities(tokens: list[int]) -> None:
    """Each --tokens as the capacity of its own geometry, or UsageError naming it."""
    for count in tokens:
        try:
            geometry(count)
        except GeometryError as error:
            raise UsageError(f"--tokens {count}: {error}") from None


def checked_common(args: argparse.Namespace) -> None:
    """The environment, --tree (resolved in place; default this package's)
    and --results-dir, or UsageError naming the first bad one."""
    from afdep.config import environment_error

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
    writable_dir(args.results_dir, "--results-dir")


def start(args: argparse.Namespace, notes: Callable[[CardBounds], list[str]]) -> dict:
    """CUDA started for logical ranks (their connection settings first), a GPU
    required whose datasheet bounds are known (else UsageError, before any
    GPU work), and the report's head: machine, rank mode, geometry, trees and
    their digests, timing, the card's bounds and `notes(bounds)`, then no
    rows yet."""
    from tools.driver.logical import use_connections

    use_connections()  # read when CUDA starts, below
    import torch

    from afdep.ranks import rank_mode_label
    from hostio import RankMode, gpu_count, machine_name

    if gpu_count() < 1:
        raise UsageError("needs a GPU, found 0")
    device_name = torch.cuda.get_device_name()
    bounds = card_bounds(device_name)
    from tools.bench.timing import node_floor_us

    return {
        "machine": machine_name(),
        "rank_mode": rank_mode_label(RankMode.LOGICAL, 2, device_name),
        "geometry": {"shape": "1A:1F", "hidden": HIDDEN, "top_k": TOP_K, "payload": "bf16"},
        "trees": {str(tree): source_digest(tree) for tree in args.tree},
        "timing": {"iters": args.iters, "warmup": args.warmup, "reps": args.reps},
        "node_floor_us": round(node_floor_us(args), 2),
        "bounds": asdict(bounds),
        "notes": notes(bounds),
        "rows": [],
    }


def measure_grids(document: dict, args: argparse.Namespace, grids, measure) -> None:
    """A row per (tokens, grid, tree), `measure(tree, tokens, grid, args,
    bounds)` at the document's bounds, into the document, each said in one
    line as it lands."""
    bounds = document_bounds(document)
    for tokens in args.tokens:
        for grid in grids:
            for tree in args.tree:
                row = measure(tree, tokens, grid, args, bounds)
                document["rows"].append(row)
                print(f"{tree} tokens={tokens} ctas={row['ctas']}: {row['us']} us", flush=True)


def tree_lines(document: dict) -> tuple[list[str], dict[str, str]]:
    """The report's tree lines (and the graph node floor, once measured), and
    each tree's short name (#0, #1, ...)."""
    lines = [
        f"- tree `{tree}`: source digest `{digest}`" for tree, digest in document["trees"].items()
    ]
    if "node_floor_us" in document:
        lines.append(
            f"- a kernel that does nothing costs {document['node_floor_us']:.2f} µs a launch "
            "in the same graph (a one-element add_): the floor under every row"
        )
    return lines, {tree: f"#{i}" for i, tree in enumerate(document["trees"])}


def table_lines(document: dict, title: str, head: tuple[str, str], cells) -> list[str]:
    """A bench's Markdown report: `title` and the rank mode, the trees, the
    table (`head`: its heading and alignment rows; a row per measurement: its
    tree, `cells(row)`, bitwise or not), the document's notes (its card's
    bounds)."""
    trees, names = tree_lines(document)
    lines = [f"# {title}, {document['rank_mode']}", "", *trees, "", *head]
    for row in document["rows"]:
        bitwise = "ok" if row["bitwise"] else "MISMATCH"
        lines.append(f"| {names[row['tree']]} | {cells(row)} | {bitwise} |")
    return [*lines, "", *(f"- {note}" for note in document["notes"])]


def grid_cells(row: dict) -> str:
    """The cells a grid bench's row opens with: tokens, CTAs, µs, MiB read
    and written, GB/s."""
    return (
        f"{row['tokens']} | {row['ctas']} | {row['us']:.2f} "
        f"| {row['read_bytes'] / 2**20:.2f} | {row['written_bytes'] / 2**20:.2f} "
        f"| {row['gbps']:.1f}"
    )


def finish(
    document: dict, bench: str, results_dir: Path, table_lines: Callable[[dict], list[str]]
) -> int:
    """`<bench>-<machine>.json` and `.md` written, the table printed; 0 when
    every row was bitwise right, else 1."""
    stem = results_dir / f"{bench}-{document['machine']}"
    write_json(stem.with_suffix(".json"), document)
    write_text(stem.with_suffix(".md"), "\n".join(table_lines(document)) + "\n")
    print("\n".join(table_lines(document)))
    return 0 if all(row["bitwise"] for row in document["rows"]) else 1


def program(prog: str, checked_arguments, run):
    """A micro-bench's `main(argv)`: its arguments checked, then `run`; a usage
    error is one line naming `prog`, exit 2, before any work; logical ranks
    that raised are one line each (error and where), exit 1."""

    @entry_point
    def main(argv: list[str] | None = None) -> int:
        try:
            return run(checked_arguments(argv))
        except UsageError as error:
            print(f"{prog}: error: {error}", file=sys.stderr)
            return 2
        except RankFailures as failed:
            for failure in failed.failures:
                print(f"{prog}: {rank_failure_line(failure)}", file=sys.stderr)
            return 1

    return main


def rank_failure_line(failure: RankFailure) -> str:
    """`logical rank R: Kind: message (at file:line)`, at the innermost frame."""
    frames = traceback.extract_tb(failure.error.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"logical rank {failure.rank}: {type(failure.error).__name__}: {failure.error}{where}"
