"""Shards of one sweep made one report (docs/architecture.md, "Sharded
sweeps"). A sweep longer than one device command runs as shards (`sweep
--only`, then `--rest-of` the last shard); `afdep-faults merge SHARD.json ...
--results-dir DIR` writes the report one sweep of them all would have:

- the shards must be one sweep's: judged by the same catalog (by its sha256,
  which must be the catalog given here; a shard `rejudge`d is judged by the
  catalog of its last pass), of the same kernel digest, machine and rank
  mode, each with its harness whole (its controls right), none over seeds;
- a run (fault, config, repeat) in two shards is an error: its verdict would
  be ambiguous;
- each fault is judged again over the runs of every shard it is in, by the
  catalog, as a sweep judges a fault over its configs and repeats; the
  mutation score, its families and the firing rate follow;
- not run: what a shard's budget left and no shard judged;
- the controls of every shard (the first of each run), the trees each built,
  the seconds summed, and each shard said in the report's head.
"""

from __future__ import annotations

import time
from pathlib import Path

from faults.catalog import Catalog, CatalogError
from faults.engine import RunResult
from faults.report import catalog_sha256, engine_share
from faults.scores import family_scores, scores
from faults.verdict import summarize_fault

SAME = ("native_source_sha256", "machine", "rank_mode")  # one sweep's shards


class MergeError(Exception):
    """Shards that cannot be one report: one line naming the shard and why."""


def merged(shards: list[tuple[Path, dict]], catalog: Catalog) -> dict:
    """The one report of `shards` (each its path and JSON document)."""
    check_shards(shards, catalog)
    controls = unique_runs(shards, "controls", duplicates_allowed=True)
    results = unique_runs(shards, "results", duplicates_allowed=False)
    faults = list(dict.fromkeys(s["fault"] for _, d in shards for s in d["faults"]))
    try:
        summaries = [
            summarize_fault(catalog.fault(f), [r for r in results if r.fault == f]) for f in faults
        ]
    except CatalogError as error:
        raise MergeError(f"the catalog given lacks a fault the shards judged: {error}") from None
    unrun = [f for _, d in shards for f in d.get("unrun") or [] if f not in faults]
    mutation, firing = scores(summaries)
    first = shards[0][1]
    stages = {
        stage: round(sum(d["stage_seconds"].get(stage, 0.0) for _, d in shards), 3)
        for stage in first["stage_seconds"]
    }
    return {
        "tool": "faults.merge",
        "catalog": str(catalog.path),
        "catalog_sha256": judged_by(first),
        **{key: first[key] for key in SAME},
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpus_needed": {k: v for _, d in shards for k, v in d["gpus_needed"].items()},
        "logical_ranks": first["logical_ranks"],
        "runnable": True,
        "harness_ok": True,
        "ok": not unrun and all(s.ok for s in summaries),
        "mutation_score": mutation,
        "mutation_score_by_family": family_scores(summaries),
        "firing_rate": firing,
        "wall_s": round(sum(d["wall_s"] for _, d in shards), 2),
        "stage_seconds": stages,
        "engine_share": engine_share(stages),
        "sites": first["sites"],
        "controls": [r.to_dict() for r in controls],
        "results": [r.to_dict() for r in results],
        "faults": [vars(s) for s in summaries],
        "budget_s": None,
        "unrun": list(dict.fromkeys(unrun)),
        "schedules": None,
        "built": list({row["fault"]: row for _, d in shards for row in d["built"]}.values()),
        "configs_not_run": {k: v for _, d in shards for k, v in d["configs_not_run"].items()},
        "gpu_runs_needed": [],
        "shards": [shard_line(path, d) for path, d in shards],
    }


def check_shards(shards: list[tuple[Path, dict]], catalog: Catalog) -> None:
    """MergeError naming the first shard that is not of the first's sweep, or
    not one this catalog judged, or whose harness was broken, or seeded."""
    ours = catalog_sha256(catalog.path)
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
    shards: list[tuple[Path, dict]], key: str, duplicates_allowed: bool
) -> list[RunResult]:
    """The shards' runs under `key`, in shard order: a run in two shards kept
    once (controls) or refused, naming both shards (faults' runs)."""
    seen: dict[tuple, Path] = {}
    runs = []
    for path, document in shards:
        for run in document[key]:
            name = (run["fault"], run["config"], run["repeat"])
            if name in seen:
                if duplicates_allowed:
                    continue
                raise MergeError(
                    f"{path}: {run['fault']} under {run['config']} (repeat {run['repeat']}) "
                    f"is in {seen[name]} too: its verdict would be ambiguous"
                )
            seen[name] = path
            runs.append(RunResult(**run))
    return runs


def shard_line(path: Path, document: dict) -> dict:
    return {
        "report": str(path),
        "written": document["written"],
        "faults": len(document["faults"]),
        "wall_s": document["wall_s"],
    }
