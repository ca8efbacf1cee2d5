"""The 4-GPU screen: C against CF at 512, 1024 and 2048 tokens on 4 GPUs, at
3A:1F, 2A:2F and 1A:3F (one afdep bench per split, traces at 2048), set beside
the changes recorded when count-first was first validated (docs/history.md).

    afdep screen [--processes 3] [--results-dir docs/results]

Writes bench-<machine>-<split>.json per split and screen-<machine>.json. With
fewer than 4 GPUs it prints the commands it would run and exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from afdep.config import environment_error
from hostio import (
    RESULTS_DIR,
    OneLineParser,
    at_least_one,
    entry_point,
    gpu_count,
    results_stem,
    write_json,
)
from tools.bench.arms import main as bench_main

GPUS = 4
BUCKETS = (512, 1024, 2048)
ARMS = ("C:AFDEP_PAYLOAD_FIRST=1", "CF:AFDEP_COUNT_FIRST_MIN_BUCKET=1")
# split -> (FFN ranks, experts): as the recorded screens ran them, 128 experts
# at 3A:1F and 2A:2F, 96 at 1A:3F (their correctness runs used 32 per FFN rank).
SPLITS = {"3a1f": (1, 128), "2a2f": (2, 128), "1a3f": (3, 96)}
# The recorded CF change against C, % (geomean over 3 processes; bf16, hidden
# 2048, capacity 2048, 24 SMs, graphs), all of the shipped tree (958652a3,
# docs/history.md, 2026-10-22). 3A:1F: its gate screen, count-first at every
# bucket with the epilogue capped at 64 SMs; no shipped screen forced
# count-first at 512 tokens there (None: not recorded). 2A:2F and 1A:3F: its
# C-vs-CF ratios.
RECORDED_CF_CHANGE_PCT: dict[str, dict[int, float | None]] = {
    "3a1f": {512: None, 1024: -4.1, 2048: -10.7},
    "2a2f": {512: 1.0, 1024: -3.0, 2048: -7.3},
    "1a3f": {512: 3.5, 1024: -0.0, 2048: -1.5},
}


def bench_args(split: str, processes: int, results_dir: Path) -> list[str]:
    ffn_ranks, experts = SPLITS[split]
    arms = [word for arm in ARMS for word in ("--arm", arm)]
    return [
        *arms,
        "--nproc",
        str(GPUS),
        "--processes",
        str(processes),
        "--buckets",
        *map(str, BUCKETS),
        "--trace-buckets",
        "2048",
        "--tag",
        split,
        "--results-dir",
        str(results_dir),
        "--",
        "--ffn-ranks",
        str(ffn_ranks),
        "--num-experts",
        str(experts),
    ]


def comparison(tables: dict[str, list[dict]]) -> list[dict]:
    """One row per (split, tokens): C and CF µs, CF's change and the recorded one."""
    rows = []
    for split, table in tables.items():
        for row in table:
            rows.append(
                {
                    "split": split,
                    "tokens": row["tokens"],
                    "C_us": row["C"]["median_us"],
                    "CF_us": row["CF"]["median_us"],
                    "CF_change_pct": row["CF"]["geomean_change_pct"],
                    "CF_repeats_faster": row["CF"]["repeats_faster"],
                    "recorded_CF_change_pct": RECORDED_CF_CHANGE_PCT[split][row["tokens"]],
                }
            )
    return rows


def recorded_cell(change_pct: float | None) -> str:
    return "not recorded" if change_pct is None else f"{change_pct:+.1f}%"


def print_comparison(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="C vs CF round trip on 4 GPUs (median µs; CF change % vs C)")
    for column in ("split", "tokens", "C", "CF", "CF change", "recorded CF change"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            row["split"],
            str(row["tokens"]),
            f"{row['C_us']:.1f}",
            f"{row['CF_us']:.1f}",
            f"{row['CF_change_pct']:+.1f}% ({row['CF_repeats_faster']}×)",
            recorded_cell(row["recorded_CF_change_pct"]),
        )
    Console(width=120).print(table)


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="afdep screen",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--processes", type=at_least_one, default=3)
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    problem = environment_error()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    found = gpu_count()
    if found < GPUS:
        print(f"the screen needs {GPUS} GPUs (found {found}; nvidia-h200-x4); it would run:")
        for split in SPLITS:
            words = bench_args(split, args.processes, args.results_dir)
            print(f"  python -m tools.bench {' '.join(words)}")
        return 0
    from hostio import machine_name

    machine = machine_name()
    tables, digests = {}, set()
    for split in SPLITS:
        if bench_main(bench_args(split, args.processes, args.results_dir)) != 0:
            print(f"the bench at {split} failed; see its log above", file=sys.stderr)
            return 1
        name = f"{results_stem('bench', machine)}-{split}.json"
        document = json.loads((args.results_dir / name).read_text())
        tables[split] = document["table"]
        digests.add(document["native_source_sha256"])
    rows = comparison(tables)
    print_comparison(rows)
    path = args.results_dir / f"{results_stem('screen', machine)}.json"
    write_json(
        path,
        {
            "tool": "tools.bench.screen",
            "machine": machine,
            "native_source_sha256": sorted(digests),
            "rows": rows,
        },
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
