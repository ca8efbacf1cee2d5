"""Reports: a seed-style summary line per (fault, config), and one JSON
document per sweep, written to a temporary file and renamed."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from faults.engine import RunResult


def summary_line(result: RunResult) -> str:
    name = f"{result.fault}-{result.config}" + (f"-r{result.repeat}" if result.repeat else "")
    outcome = result.outcome
    if outcome is None:
        return (
            f"{name} tree={result.tree_digest[:8] or '-'} {result.verdict}: "
            f"{result.reason.splitlines()[0]}"
        )
    own = outcome["markers"].get(result.fault, 0)
    return (
        f"{name} tree={result.tree_digest[:8]} exit={outcome['exit_code']} "
        f"mismatch={outcome['mismatches']} timeout_msgs={outcome['timeout_lines']} "
        f"markers={own} assert={outcome['assertion_lines']} -> {result.verdict}"
        + ("" if result.ok and result.verdict != "SURVIVED" else f" ({result.reason})")
    )


def report_document(
    *,
    catalog: str,
    target: str,
    user_digest: str,
    controls: list[RunResult],
    results: list[RunResult],
    wall_s: float,
    harness_ok: bool,
) -> dict:
    stage = {
        key: round(sum(r.seconds.get(key, 0.0) for r in (*controls, *results)), 3)
        for key in ("apply", "build", "run")
    }
    # A tree's apply and build serve all its configs and repeats: count them once.
    seen, once = set(), {"apply": 0.0, "build": 0.0}
    for result in (*controls, *results):
        if result.fault not in seen:
            seen.add(result.fault)
            once["apply"] += result.seconds.get("apply", 0.0)
            once["build"] += result.seconds.get("build", 0.0)
    stage.update({k: round(v, 3) for k, v in once.items()})
    engine_s = max(wall_s - stage["build"] - stage["run"], 0.0)
    return {
        "tool": "faults",
        "catalog": catalog,
        "target": target,
        "user_tree_digest": user_digest,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "harness_ok": harness_ok,
        "ok": harness_ok and all(r.ok for r in results),
        "wall_s": round(wall_s, 3),
        "stage_seconds": stage,
        "engine_share": round(engine_s / wall_s, 4) if wall_s else 0.0,
        "controls": [r.to_dict() for r in controls],
        "results": [r.to_dict() for r in results],
        "summary": [summary_line(r) for r in (*controls, *results)],
    }


def write_json(path: Path, document: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(document, handle, indent=1)
        handle.write("\n")
    os.replace(tmp, path)
