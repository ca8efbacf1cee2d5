"""A scheduled fault judged over its seeds (docs/operators.md, "Seeded
schedules and replay"): one summary per catalog fault, its runs over every
seed taken together; a row per seed; and the kill rates per fault and per
schedule family that the report's `schedules` holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from faults.catalog import Catalog
from faults.judge.run_result import RunResult
from faults.judge.verdict import FaultSummary, Verdict, summarize_fault
from faults.schedules.ids import base_id
from faults.schedules.seeds import describe, schedule_family


def summaries_over_seeds(
    catalog: Catalog, fault_ids: list[str], results: list[RunResult]
) -> list[FaultSummary]:
    """One summary per catalog fault: a seeded fault's runs over all its seeds
    taken together, as repeats are (a must-fail fault killed by some seeds
    only is FLAKY, with its kill rate); its own markers summed over them."""
    groups: dict[str, list[str]] = {}
    for fault_id in fault_ids:
        base = base_id(fault_id)
        groups.setdefault(base if base in catalog.faults else fault_id, []).append(fault_id)
    summaries = []
    for base, labels in groups.items():
        runs = [r for r in results if r.fault in labels]
        markers: dict[str, int] = {}
        for label in labels:
            own = [r for r in runs if r.fault == label]
            for config, count in summarize_fault(catalog.fault(label), own).markers.items():
                markers[config] = markers.get(config, 0) + count
        summaries.append(replace(summarize_fault(catalog.fault(base), runs), markers=markers))
    return summaries


def seed_rows(catalog: Catalog, fault_ids: list[str], results: list[RunResult]) -> list[dict]:
    """Per seeded fault: its seed, what it drew, its verdict over its runs."""
    rows = []
    for label in fault_ids:
        seed, drawn = describe(catalog, label)
        if seed is None or base_id(label) == label:
            continue
        runs = [r for r in results if r.fault == label]
        summary = summarize_fault(catalog.fault(label), runs)
        rows.append(
            {
                "fault": base_id(label),
                "seed": seed,
                "family": schedule_family(catalog, label),
                "expect": summary.expect,
                "schedule": drawn,
                "verdict": summary.verdict.value,
                "killed": summary.killed,
                "fired": summary.fired,
                "runs": [r.run_id for r in runs],
                "tree_digest": runs[0].tree_digest if runs else "",
            }
        )
    return rows


def report_schedules(
    catalog: Catalog, fault_ids: list[str], results: list[RunResult], seeds: Iterable[int]
) -> dict:
    """The report's `schedules`: the seeds run, a row per seeded fault, and the
    kill rates per fault and per schedule family (a sweep's, and a rejudged one's)."""
    rows = seed_rows(catalog, fault_ids, results)
    return {"seeds": list(seeds), "runs": rows, **kill_rates(rows)}


def kill_rates(rows: list[dict]) -> dict:
    """Per catalog fault and per schedule family: the seeds run, those whose
    runs all killed (must-fail) or all passed (must-pass), and the rate."""
    by_fault: dict[str, dict] = {}
    for row in rows:
        entry = by_fault.setdefault(
            row["fault"],
            {
                "family": row["family"],
                "expect": row["expect"],
                "seeds": 0,
                "met": 0,
                "verdicts": {},
            },
        )
        wanted = Verdict.KILLED if row["expect"] == "fail" else Verdict.PASSED
        entry["seeds"] += 1
        entry["met"] += row["verdict"] == wanted.value
        entry["verdicts"][str(row["seed"])] = row["verdict"]
    families: dict[str, dict] = {}
    for entry in by_fault.values():
        entry["rate"] = round(entry["met"] / entry["seeds"], 4)
        family = families.setdefault(
            entry["family"], {"faults": 0, "seeds": 0, "killed": 0, "pass_seeds": 0, "passed": 0}
        )
        if entry["expect"] == "fail":
            family["faults"] += 1
            family["seeds"] += entry["seeds"]
            family["killed"] += entry["met"]
        else:
            family["pass_seeds"] += entry["seeds"]
            family["passed"] += entry["met"]
    for family in families.values():
        family["kill_rate"] = (
            round(family["killed"] / family["seeds"], 4) if family["seeds"] else None
        )
    return {"faults": by_fault, "families": dict(sorted(families.items()))}
