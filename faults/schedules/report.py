"""The sweep's Markdown of seeded schedules (docs/operators.md, "Seeded
schedules and replay"): the kill rate per schedule family and per fault over
its seeds, and each seed's run ids, what it drew and its verdict. It reads
the report's `schedules` (faults/schedules/over_seeds.py), and the report's
Markdown (faults/report/markdown.py) takes it, so it sits below the report."""

from __future__ import annotations

KILL_RATE = (
    "kill rate = seeds whose every run killed / seeds of must-fail faults; "
    "met: seeds whose runs all killed (must-fail) or all passed (must-pass)"
)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def schedule_tables(schedules: dict | None) -> list[str]:
    """Nothing without seeds; else three tables: families, faults, seeds."""
    if not schedules:
        return []
    seeds = schedules["seeds"]
    lines = [
        "",
        f"## Kill rate per schedule family ({len(seeds)} seeds from {seeds[0]})",
        "",
        KILL_RATE,
        "",
        "| family | must-fail faults | seeds | killed | kill rate | must-pass seeds | passed |",
        "|---|---|---|---|---|---|---|",
    ]
    for family, row in schedules["families"].items():
        lines.append(
            f"| {family} | {row['faults']} | {row['seeds']} | {row['killed']} | "
            f"{_rate(row['kill_rate'])} | {row['pass_seeds']} | {row['passed']} |"
        )
    lines += ["", "| fault | family | expect | seeds | met | rate | verdict per seed |"]
    lines.append("|---|---|---|---|---|---|---|")
    for fault, row in schedules["faults"].items():
        verdicts = ", ".join(f"s{seed} {word}" for seed, word in row["verdicts"].items())
        lines.append(
            f"| {fault} | {row['family']} | {row['expect']} | {row['seeds']} | {row['met']} | "
            f"{_rate(row['rate'])} | {verdicts} |"
        )
    lines += ["", "| run ids | verdict | schedule |", "|---|---|---|"]
    for row in schedules["runs"]:
        runs = " ".join(f"`{run}`" for run in row["runs"])
        lines.append(f"| {runs} | {row['verdict']} | {row['schedule']} |")
    return lines
