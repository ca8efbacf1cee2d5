"""Shards of one sweep made one report (docs/architecture.md, "Sharded
sweeps"). A sweep longer than one device command runs as shards (`sweep
--only`, then `--rest-of` the last shard); `afdep-faults merge SHARD.json ...
--results-dir DIR` writes the report one sweep of them all would have:

- the shards must be one sweep's: judged by the same catalog (by its sha256,
  which must be the catalog given here; a shard `rejudge`d is judged by the
  catalog of its last pass), of the same kernel digest, machine and rank
  mode, each with its harness whole (its controls right), none over seeds;
- a run (fault, config, repeat) in two shards is an error: its verdict would
  be ambiguous; with `--rerun-wins` the run of the shard written last is kept
  (a fault re-run after a harness fix) and each run it replaced is listed;
- each fault is judged again over the runs of every shard it is in, by the
  catalog, as a sweep judges a fault over its configs and repeats; the
  mutation score, its families and the firing rate follow;
- not run: what a shard's budget left and no shard judged; in no shard: the
  catalog's faults no shard selected (a sweep still owed them, not a verdict);
- the controls of every shard (the first of each run), the trees each built,
  the seconds summed, and each shard said in the report's head.
"""

from __future__ import annotations

import time
from pathlib import Path

from faults.catalog import Catalog
from faults.judge.scores import family_scores, scores
from faults.judge.seeds import run_id
from faults.judge.verdict import summarize_fault
from faults.pipeline.engine import RunResult
from faults.report.compare import run_key
from faults.report.document import catalog_sha256, engine_share, stage_seconds

SAME = ("native_source_sha256", "machine", "rank_mode")  # one sweep's shards
# What a shard must hold; older reports may lack the rest (sites, trees built,
# stage seconds, ...), which the merged report then lacks too.
NEEDED = (
    *SAME,
    "catalog_sha256",
    "written",
    "runnable",
    "harness_ok",
    "controls",
    "results",
    "faults",
)


class MergeError(Exception):
    """Shards that cannot be one report: one line naming the shard and why."""


def merged(shards: list[tuple[Path, dict]], catalog: Catalog, rerun_wins: bool = False) -> dict:
    """The one report of `shards` (each its path and JSON document); with
    `rerun_wins`, a run in two shards is the later shard's."""
    check_shards(shards, catalog)
    controls, _ = unique_runs(shards, "controls", "first")
    results, superseded = unique_runs(shards, "results", "later" if rerun_wins else "refuse")
    faults = list(dict.fromkeys(s["fault"] for _, d in shards for s in d["faults"]))
    for path, document in shards:
        unknown = next(
            (s["fault"] for s in document["faults"] if s["fault"] not in catalog.faults), None
        )
        if unknown is not None:
            raise MergeError(f"{path}: fault {unknown} is not in {catalog.path}")
    summaries = [
        summarize_fault(catalog.fault(f), [r for r in results if r.fault == f]) for f in faults
    ]
    unrun = [f for _, d in shards for f in d.get("unrun") or [] if f not in faults]
    selected = {*faults, *unrun}
    not_selected = [f for f in catalog.faults if f not in selected]
    mutation, firing = scores(summaries)
    first = shards[0][1]
    # Each shard's own work, its controls too, from its runs (older shards
    # stored fewer stages than their runs' seconds hold).
    per_shard = [
        stage_seconds([RunResult(**run) for run in (*d["controls"], *d["results"])])
        for _, d in shards
    ]
    stages = {stage: round(sum(s[stage] for s in per_shard), 3) for stage in per_shard[0]}
    return {
        "tool": "faults.sweep.merge",
        "catalog": str(catalog.path),
        "catalog_sha256": judged_by(first),
        **{key: first[key] for key in SAME},
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpus_needed": {k: v for _, d in shards for k, v in d.get("gpus_needed", {}).items()},
        "logical_ranks": first.get("logical_ranks", first["rank_mode"] == "logical"),
        "runnable": True,
        "harness_ok": True,
        "ok": not unrun and all(s.ok for s in summaries),
        "mutation_score": mutation,
        "mutation_score_by_family": family_scores(summaries),
        "firing_rate": firing,
        "wall_s": round(sum(d.get("wall_s", 0.0) for _, d in shards), 2),
        "stage_seconds": stages,
        "engine_share": engine_share(stages),
        "sites": first.get("sites", []),
        "controls": [r.to_dict() for r in controls],
        "results": [r.to_dict() for r in results],
        "faults": [vars(s) for s in summaries],
        "budget_s": None,
        "unrun": list(dict.fromkeys(unrun)),
        "not_selected": not_selected,
        "schedules": None,
        "built": list(
            {row["fault"]: row for _, d in shards for row in d.get("built", [])}.values()
        ),
        "configs_not_run": {
            k: v for _, d in shards for k, v in d.get("configs_not_run", {}).items()
        },
        "gpu_runs_needed": [],
        "shards": [shard_line(path, d) for path, d in shards],
        "superseded": superseded,
    }


def check_shards(shards: list[tuple[Path, dict]], catalog: Catalog) -> None:
    """MergeError naming the first shard that is not of the first's sweep, or
    not one this catalog judged, or whose harness was broken, or seeded."""
    ours = catalog_sha256(catalog.path)
    for path, document in shards:
        missing = next((key for key in NEEDED if key not in document), None)
        if missing is not None:
            raise MergeError(f"{path}: not a sweep report merge can read (no {missing})")
    first_path, first = shards[0]
    for path, document in shards:
        for key in SAME:
            if document.get(key) != first.get(key):
                raise MergeError(
                    f"{path}: its {key} is {document.get(key)!r}, "
                    f"{first_path}'s is {first.get(key)!r}: not one sweep's shards"
                )
        if judged_by(document) != ours:
            raise MergeError(
                f"{path}: judged by a catalog of sha256 {judged_by(document)[:12]}, "
                f"not {catalog.path} ({ours[:12]}): give that catalog, or rejudge it by this one"
            )
        if not (document.get("runnable") and document.get("harness_ok")):
            raise MergeError(f"{path}: its harness was broken or it ran nothing: no fault judged")
        if document.get("schedules"):
            raise MergeError(f"{path}: a shard over seeds (sweep --seeds): merge takes none")


def judged_by(document: dict) -> str:
    """The sha256 of the catalog whose rules gave the shard's verdicts: its
    last `rejudge` pass's, else the sweep's."""
    passes = document.get("rejudged") or []
    return passes[-1]["catalog_sha256"] if passes else document["catalog_sha256"]


def unique_runs(
    shards: list[tuple[Path, dict]], key: str, twice: str
) -> tuple[list[RunResult], list[dict]]:
    """The shards' runs under `key`, in shard order, and the runs dropped: a
    run in two shards is kept once, the first (`twice="first"`: controls),
    the one of the shard written last (`"later"`: a fault re-run after a
    harness fix, with --rerun-wins), or refused naming both (`"refuse"`)."""
    kept: dict[tuple, tuple[Path, dict, dict]] = {}  # in first-seen order
    dropped = []
    for path, document in shards:
        for run in document[key]:
            name = run_key(run)
            if name not in kept:
                kept[name] = (path, document, run)
                continue
            if twice == "refuse":
                raise MergeError(
                    f"{path}: {run['fault']} under {run['config']} (repeat {run['repeat']}) "
                    f"is in {kept[name][0]} too: its verdict would be ambiguous "
                    "(--rerun-wins keeps the later shard's)"
                )
            if twice == "later":
                earlier = kept[name]
                later = document["written"] > earlier[1]["written"]
                if later:
                    kept[name] = (path, document, run)
                dropped.append(
                    {
                        "run": run_id(RunResult(**run)),
                        "kept": str(kept[name][0]),
                        "dropped": str(earlier[0] if later else path),
                    }
                )
    return [RunResult(**run) for _, _, run in kept.values()], dropped


def shard_line(path: Path, document: dict) -> dict:
    return {
        "report": str(path),
        "written": document["written"],
        "faults": len(document["faults"]),
        "wall_s": document.get("wall_s", 0.0),
    }
