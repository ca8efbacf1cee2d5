"""Reports: one summary line per (fault, config), and one JSON
document per sweep, written to a temporary file and renamed."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from faults.judge.seeds import run_id
from faults.judge.verdict import Verdict
from faults.pipeline.engine import RunResult

# Verdicts that meet their expectation yet say why: a known survivor, a
# survivor the static contract catches.
SAID_IN_FULL = (Verdict.SURVIVED, Verdict.UNOBSERVABLE)


def summary_line(result: RunResult) -> str:
    """The line starts with the run id `replay` takes (faults/judge/seeds.py)."""
    name = run_id(result)
    outcome = result.outcome
    if outcome is None:
        return (
            f"{name} tree={result.tree_digest[:8] or '-'} {result.verdict}: "
            f"{result.reason.splitlines()[0]}"
        )
    own = outcome["markers"].get(result.fault, 0)
    device_errors = outcome.get("device_errors", 0)
    return (
        f"{name} tree={result.tree_digest[:8]} exit={outcome['exit_code']} "
        f"mismatch={outcome['mismatches']} timeout_msgs={outcome['timeout_lines']} "
        f"markers={own} assert={outcome['assertion_lines']}"
        + (f" device_err={device_errors}" if device_errors else "")
        + f" -> {result.verdict}"
        + ("" if result.ok and result.verdict not in SAID_IN_FULL else f" ({result.reason})")
    )


PER_TREE = ("apply", "build", "sass")  # a tree's, serving all its configs and repeats
PER_RUN = ("run", "judge")
ENGINE_STAGES = ("apply", "sass", "judge")  # the engine's own work, not the target's


def stage_seconds(results: list[RunResult]) -> dict[str, float]:
    """Seconds in apply, build, sass (the erasure check), run and judge (parse
    + verdict). A tree's apply, build and sass serve all its configs and
    repeats, so they count once per tree."""
    once: dict[str, dict[str, float]] = {}
    for result in results:
        once.setdefault(result.fault, result.seconds)
    per_tree = {stage: sum(s.get(stage, 0.0) for s in once.values()) for stage in PER_TREE}
    per_run = {stage: sum(r.seconds.get(stage, 0.0) for r in results) for stage in PER_RUN}
    return {stage: round(seconds, 3) for stage, seconds in {**per_tree, **per_run}.items()}


def engine_share(stages: dict[str, float]) -> float:
    """The engine's own share of a sweep's stage seconds: scratch trees and
    patches (apply), the erasure check's build and disassembly (sass) and
    reading logs into verdicts (judge), against the target's build and run.
    Stage seconds, not wall time: with several runs per GPU group the stages
    overlap."""
    total = sum(stages.values())
    own = sum(stages.get(stage, 0.0) for stage in ENGINE_STAGES)
    return round(own / total, 4) if total else 0.0


def report_document(
    *,
    catalog: str,
    target: str,
    user_digest: str,
    machine: str,
    rank_mode: str,
    controls: list[RunResult],
    results: list[RunResult],
    wall_s: float,
    harness_ok: bool,
) -> dict:
    stage = stage_seconds([*controls, *results])
    return {
        "tool": "faults",
        "catalog": catalog,
        "catalog_sha256": catalog_sha256(catalog),
        "target": target,
        "user_tree_digest": user_digest,
        "machine": machine,
        "rank_mode": rank_mode,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "harness_ok": harness_ok,
        "ok": harness_ok is not False and all(r.ok for r in results),
        "wall_s": round(wall_s, 3),
        "stage_seconds": stage,
        "engine_share": engine_share(stage),
        "controls": [r.to_dict() for r in controls],
        "results": [r.to_dict() for r in results],
        "summary": [summary_line(r) for r in (*controls, *results)],
    }


def catalog_sha256(path) -> str:
    """The catalog a report judged by: faults change, so reports say which."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
