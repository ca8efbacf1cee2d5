"""The screen's numbers: per bucket, each arm's median round trip over the
processes and its paired change against the control arm (and their geometric
mean), beside NCCL and the peer copy; the performance targets as ratios; the
console table."""

from __future__ import annotations

import math
from statistics import median_high

CONTROL = "C"  # the arm every other is paired with


def paired_change(arm: float, control: float) -> float:
    return (arm - control) / control * 100.0


def geomean_change(changes: list[float]) -> float:
    return (math.exp(sum(math.log1p(c / 100.0) for c in changes) / len(changes)) - 1) * 100


def summarize(processes: list[dict], arms: list[str], buckets: list[int]) -> list[dict]:
    """One row per bucket from the attention rank's (rank 0) medians."""
    rows = []
    runs = [p["ranks"][0]["results"] for p in processes]  # each process's rank 0
    for bucket in map(str, buckets):
        row = {"tokens": int(bucket)}
        for arm in arms:
            values = [r[arm][bucket]["round_trip_us"] for r in runs]
            changes = [
                paired_change(r[arm][bucket]["round_trip_us"], r[CONTROL][bucket]["round_trip_us"])
                for r in runs
            ]
            row[arm] = {
                "median_us": round(median_high(values), 2),
                "dispatch_us": round(median_high(r[arm][bucket]["dispatch_us"] for r in runs), 2),
                "paired_change_pct": [round(c, 2) for c in changes],
                "geomean_change_pct": round(geomean_change(changes), 2),
                "repeats_faster": sum(c < 0 for c in changes),
            }
        row["nccl_round_trip_us"] = median_high(r["nccl"][bucket]["round_trip_us"] for r in runs)
        pipeline = [r.get("nccl_pipeline", {}).get(bucket) for r in runs]
        row["nccl_pipeline_round_trip_us"] = (
            median_high(p["round_trip_us"] for p in pipeline) if all(pipeline) else None
        )  # None: not measured (an fp8 payload, or a document from before the pipeline)
        row["peer_copy_gb_per_s"] = median_high(r["peer_copy"][bucket]["gb_per_s"] for r in runs)
        rows.append(row)
    return rows


def targets(rows: list[dict], arms: list[str], row_bytes: int) -> dict:
    """The performance targets (docs/tools.md, "Performance targets") as ratios in this run,
    reported, never gated here."""
    report = {}
    by_tokens = {row["tokens"]: row for row in rows}
    if 2048 in by_tokens:
        row = by_tokens[2048]
        for arm in arms:
            gbps = 2048 * row_bytes / row[arm]["dispatch_us"] / 1e3
            report[f"{arm}.dispatch_2048_vs_peer_copy"] = round(gbps / row["peer_copy_gb_per_s"], 3)
    for tokens, row in by_tokens.items():
        for arm in arms:
            ratio = row["nccl_round_trip_us"] / row[arm]["median_us"]
            report[f"{arm}.speedup_vs_nccl_at_{tokens}"] = round(ratio, 2)
            if row.get("nccl_pipeline_round_trip_us"):
                ratio = row["nccl_pipeline_round_trip_us"] / row[arm]["median_us"]
                report[f"{arm}.speedup_vs_nccl_pipeline_at_{tokens}"] = round(ratio, 2)
    return report


def print_table(rows: list[dict], arms: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="round trip µs (median over processes; change % vs C, geomean)")
    for column in ("tokens", *arms, "NCCL a2a", "peer copy GB/s"):
        table.add_column(column, justify="right")
    for row in rows:
        cells = [str(row["tokens"])]
        for arm in arms:
            cell = f"{row[arm]['median_us']:.1f}"
            if arm != CONTROL:
                cell += f" ({row[arm]['geomean_change_pct']:+.1f}%, {row[arm]['repeats_faster']}×)"
            cells.append(cell)
        cells += [f"{row['nccl_round_trip_us']:.1f}", f"{row['peer_copy_gb_per_s']:.0f}"]
        table.add_row(*cells)
    Console(width=160).print(table)
