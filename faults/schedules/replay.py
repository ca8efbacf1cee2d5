"""One run of a sweep report run again, its schedule applied as recorded
(docs/operators.md, "Seeded schedules and replay"): the recorded run, the
catalog as the sweep saw it, the run again (or its tree applied only:
--no-run), both sides compared, and the Markdown."""

from __future__ import annotations

import shutil
from pathlib import Path

from faults.catalog import Catalog, Config
from faults.catalog.errors import FaultsError
from faults.pipeline.apply import apply_fault
from faults.pipeline.scratch import target_scratch, tree_digest
from faults.report.document import SweepReport
from faults.schedules.ids import RunId
from faults.schedules.seeds import describe, with_seed


class ReplayError(FaultsError):
    """A run that cannot be replayed as asked; said in one line."""


def recorded_run(report: SweepReport, run: RunId) -> dict | None:
    """The result of `run` in the report, as it was written (None: not in it)."""
    return next((r.to_dict() for r in report.results if r.run_id == str(run)), None)


def replay_catalog(catalog: Catalog, run: RunId) -> Catalog:
    """The catalog as the sweep saw `run`: its real-size configs, and the run's
    fault seeded as it was; a fault or config it lacks is named before any
    tree is made."""
    catalog = catalog.with_exposure()
    if run.fault not in catalog.faults:
        raise ReplayError(f"replay: run id {run}: no fault {run.fault!r} in {catalog.path}")
    catalog.config(run.config)
    return catalog if run.seed is None else with_seed(catalog, run.fault, run.seed)


def replayed(engine, run: RunId, config: Config, apply_only: bool) -> dict:
    """`run` again on `engine` as a report records a run: applied, built and
    run once under `config` (its repeat as recorded); with `apply_only`, the
    tree applied only. ApplyError when the fault no longer applies."""
    if apply_only:
        return applied_only(engine, run.label)
    [result] = engine.evaluate(run.label, [config], 1)
    return {**result.to_dict(), "repeat": run.repeat}


def applied_only(engine, label: str) -> dict:
    """--no-run: the tree applied (not built), its digest and schedule only;
    ApplyError when the fault no longer applies."""
    tree = engine.workdir / label / "tree"
    if tree.exists():  # a --workdir reused: this command's own old scratch tree
        shutil.rmtree(tree)
    sources = target_scratch(engine.root, tree, engine.catalog.target)
    apply_fault(sources, engine.catalog, label)
    seed, schedule = describe(engine.catalog, label)
    digest = tree_digest(sources.root)
    return {"tree_digest": digest, "schedule": schedule, "seed": seed, "verdict": None}


def compare(run: RunId, recorded: dict, replayed: dict, source: Path) -> dict:
    """Both sides and whether the replay reproduced the run: the same schedule,
    the same tree and (when it ran) the same verdict."""
    same_schedule = recorded.get("schedule", "") == replayed["schedule"]
    same_tree = recorded.get("tree_digest") == replayed["tree_digest"]
    ran = replayed["verdict"] is not None
    same_verdict = ran and recorded.get("verdict") == replayed["verdict"]
    return {
        "run_id": str(run),
        "from": str(source),
        "recorded": recorded,
        "replayed": replayed,
        "same_schedule": same_schedule,
        "same_tree": same_tree,
        "same_verdict": same_verdict if ran else None,
        "reproduced": same_schedule and same_tree and (same_verdict or not ran),
    }


def _cell(text) -> str:
    return "-" if text in (None, "") else str(text).replace("|", "/").splitlines()[0][:200]


def replay_markdown(comparison: dict) -> str:
    """The recorded run and its replay side by side, then the one-line answer."""
    recorded, replayed = comparison["recorded"], comparison["replayed"]
    rows = [
        ("schedule", recorded.get("schedule"), replayed["schedule"], comparison["same_schedule"]),
        (
            "tree digest",
            (recorded.get("tree_digest") or "")[:12],
            replayed["tree_digest"][:12],
            comparison["same_tree"],
        ),
        ("verdict", recorded.get("verdict"), replayed["verdict"], comparison["same_verdict"]),
        ("reason", recorded.get("reason"), replayed.get("reason"), None),
    ]
    lines = [
        f"# Replay of {comparison['run_id']}",
        "",
        f"from {comparison['from']}",
        "",
        "| | recorded | replayed | same |",
        "|---|---|---|---|",
    ]
    for name, left, right, same in rows:
        said = "" if same is None else ("yes" if same else "NO")
        lines.append(f"| {name} | {_cell(left)} | {_cell(right)} | {said} |")
    checks = {"schedule": "same_schedule", "tree": "same_tree", "verdict": "same_verdict"}
    said = [name for name, key in checks.items() if comparison[key] is not None]
    if comparison["reproduced"]:
        answer = "reproduced: " + ", ".join(f"the same {name}" for name in said)
    else:
        differ = [name for name in said if not comparison[checks[name]]]
        answer = "NOT reproduced: another " + ", another ".join(differ)
    return "\n".join([*lines, "", answer]) + "\n"
