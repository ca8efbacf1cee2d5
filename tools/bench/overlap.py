"""The overlap screen: what the exchange costs the GEMMs it runs beside. Each
rank times a chain of bf16 GEMMs on a compute stream alone, then again while
its dispatch and combine graphs replay on the communication stream (the FFN
rank's streaming epilogue holds SMs the GEMMs want). The gate: the FFN rank's
GEMM ≤ 1 µs slower beside the exchange than alone (docs/tools.md,
"Performance targets")."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

GATE_ADDED_US = 1.0


def gemm_operands(m: int, n: int, k: int, device):
    import torch

    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(m, k, dtype=torch.bfloat16, device=device, generator=generator)
    b = torch.randn(k, n, dtype=torch.bfloat16, device=device, generator=generator)
    return a, b


def _gemm_chain_us(a, b, gemms: int, stream) -> float:
    """Per-GEMM µs of `gemms` back-to-back GEMMs on `stream` (events on it)."""
    import torch

    with torch.cuda.stream(stream):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(gemms):
            torch.mm(a, b)
        end.record()
    end.synchronize()
    return begin.elapsed_time(end) * 1e3 / gemms


def _exchange_us(exchange: Callable[[], None], times: int) -> float:
    """µs of `times` exchanges back to back on the current stream."""
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(times):
        exchange()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) * 1e3


def overlap_us(
    exchange: Callable[[], None],
    a,
    b,
    gemms: int,
    repeats: int,
    barrier: Callable[[], None],
    agree_max: Callable[[int], int],
) -> dict[str, float]:
    """Median per-GEMM µs alone and beside the exchange, the difference, and
    the exchange's µs beside the GEMMs. The exchange (replayed on the current
    stream, every rank together) repeats enough times to span the whole GEMM
    chain, the same count on every rank (`agree_max`), so every GEMM of the
    chain runs beside it."""
    import torch

    compute = torch.cuda.Stream()
    chain_us = _gemm_chain_us(a, b, gemms, compute) * gemms  # also the warm-up
    barrier()
    spans = agree_max(math.ceil(chain_us / max(_exchange_us(exchange, 1), 1.0)) + 1)
    alone, beside, exchanges = [], [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        alone.append(_gemm_chain_us(a, b, gemms, compute))
        barrier()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(spans):
            exchange()
        end.record()
        beside.append(_gemm_chain_us(a, b, gemms, compute))
        end.synchronize()
        exchanges.append(begin.elapsed_time(end) * 1e3 / spans)
    return summary(alone, beside, exchanges)


def summary(alone: list[float], beside: list[float], exchanges: list[float]) -> dict[str, float]:
    gemm_alone, gemm_beside = statistics.median(alone), statistics.median(beside)
    return {
        "gemm_alone_us": round(gemm_alone, 2),
        "gemm_beside_exchange_us": round(gemm_beside, 2),
        "gemm_added_us": round(gemm_beside - gemm_alone, 2),
        "exchange_beside_gemms_us": round(statistics.median(exchanges), 2),
    }


def overlap_rows(processes: list[dict], arms: list[str]) -> list[dict]:
    """One row per (bucket, arm, role): medians over processes of each rank's
    overlap figures (the worker's `overlap` results), and the gate for the FFN
    rank."""
    rows = []
    first = processes[0]["ranks"]
    for bucket in sorted(first[0]["results"].get("overlap", {}).get(arms[0], {}), key=int):
        for arm in arms:
            for rank in first:
                figures = [
                    p["ranks"][rank["rank"]]["results"]["overlap"][arm][bucket] for p in processes
                ]
                row = {"tokens": int(bucket), "arm": arm, "role": str(rank["role"])}
                for key in figures[0]:
                    row[key] = round(statistics.median(f[key] for f in figures), 2)
                if row["role"] == "ffn":
                    row["gate_ok"] = row["gemm_added_us"] <= GATE_ADDED_US
                rows.append(row)
    return rows


def overlap_lines(rows: list[dict]) -> list[str]:
    """The Markdown table of the overlap screen (none: nothing)."""
    if not rows:
        return []
    lines = [
        "## Overlap: GEMM µs alone and beside the exchange "
        f"(gate: the FFN rank's GEMM ≤ {GATE_ADDED_US:g} µs slower)",
        "",
        "| tokens | arm | role | GEMM alone | GEMM beside | added | exchange beside | gate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        gate = "" if "gate_ok" not in row else ("ok" if row["gate_ok"] else "MISSED")
        lines.append(
            f"| {row['tokens']} | {row['arm']} | {row['role']} | {row['gemm_alone_us']:.2f} | "
            f"{row['gemm_beside_exchange_us']:.2f} | {row['gemm_added_us']:+.2f} | "
            f"{row['exchange_beside_gemms_us']:.1f} | {gate} |"
        )
    return lines + [""]
