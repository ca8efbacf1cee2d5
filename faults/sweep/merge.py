"""Shards of one sweep made one report (docs/tools.md, "Sharded
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

from pathlib import Path

from faults.catalog import Catalog
from faults.catalog.errors import FaultsError
from faults.judge.run_result import RunResult
from faults.judge.verdict import summarize_fault
from faults.report.compare import run_key
from faults.report.document import SweepReport, catalog_sha256, stage_seconds

SAME = ("native_source_sha256", "machine", "rank_mode")  # one sweep's shards
# What a shard must hold; older reports may lack the rest (sites, trees built,
# stage seconds, ...), which the merged report then lacks too.
NEEDED = (*SAME, "catalog_sha256", "written", "runnable", "harness_ok", "controls", "results")

Shard = tuple[Path, SweepReport]


class MergeError(FaultsError):
    """Shards that cannot be one report: one line naming the shard and why."""


def merged(shards: list[Shard], catalog: Catalog, rerun_wins: bool = False) -> SweepReport:
    """The one report of `shards` (each its path and report); with
    `rerun_wins`, a run in two shards is the later shard's."""
    check_shards(shards, catalog)
    controls, _ = unique_runs(shards, "controls", "first")
    results, superseded = unique_runs(shards, "results", "later" if rerun_wins else "refuse")
    faults = list(dict.fromkeys(s.fault for _, report in shards for s in report.faults))
    summaries = [
        summarize_fault(catalog.fault(f), [r for r in results if r.fault == f]) for f in faults
    ]
    unrun = [f for _, report in shards for f in report.unrun if f not in faults]
    first = shards[0][1]
    return SweepReport(
        catalog=str(catalog.path),
        catalog_sha256=first.judged_by(),
        target=first.target,
        machine=first.machine,
        native_source_sha256=first.native_source_sha256,
        rank_mode=first.rank_mode,
        tool="faults.merge",
        controls=controls,
        results=results,
        faults=summaries,
        harness_ok=True,
        gpus_needed={k: v for _, report in shards for k, v in report.gpus_needed.items()},
        logical_ranks=first.logical_ranks,
        wall_s=round(sum(report.wall_s for _, report in shards), 2),
        stage_seconds=summed_stage_seconds(shards),
        sites=first.sites,
        unrun=list(dict.fromkeys(unrun)),
        built=list({row["fault"]: row for _, report in shards for row in report.built}.values()),
        configs_not_run={k: v for _, r in shards for k, v in r.configs_not_run.items()},
        not_selected=[f for f in catalog.faults if f not in {*faults, *unrun}],
        shards=[shard_line(path, report) for path, report in shards],
        superseded=superseded,
    )


def summed_stage_seconds(shards: list[Shard]) -> dict[str, float]:
    """Each shard's own work, its controls too, from its runs (older shards
    stored fewer stages than their runs' seconds hold), summed."""
    per_shard = [stage_seconds([*r.controls, *r.results]) for _, r in shards]
    return {stage: round(sum(s[stage] for s in per_shard), 3) for stage in per_shard[0]}


def check_shards(shards: list[Shard], catalog: Catalog) -> None:
    """MergeError naming the first shard that is not of the first's sweep, or
    not one this catalog judged, or whose harness was broken, or seeded, or
    that holds a fault the catalog lacks."""
    ours = catalog_sha256(catalog.path)
    first_path, first = shards[0]
    for path, report in shards:
        for key in SAME:
            if getattr(report, key) != getattr(first, key):
                raise MergeError(
                    f"{path}: its {key} is {getattr(report, key)!r}, "
                    f"{first_path}'s is {getattr(first, key)!r}: not one sweep's shards"
                )
        if report.judged_by() != ours:
            raise MergeError(
                f"{path}: judged by a catalog of sha256 {report.judged_by()[:12]}, "
                f"not {catalog.path} ({ours[:12]}): give that catalog, or rejudge it by this one"
            )
        if not (report.runnable and report.harness_ok):
            raise MergeError(f"{path}: its harness was broken or it ran nothing: no fault judged")
        if report.schedules:
            raise MergeError(f"{path}: a shard over seeds (sweep --seeds): merge takes none")
        unknown = next((s.fault for s in report.faults if s.fault not in catalog.faults), None)
        if unknown is not None:
            raise MergeError(f"{path}: fault {unknown} is not in {catalog.path}")


def unique_runs(shards: list[Shard], key: str, twice: str) -> tuple[list[RunResult], list[dict]]:
    """The shards' runs under `key` (controls or results), in shard order, and
    the runs dropped: a run in two shards is kept once, the first
    (`twice="first"`: controls), the one of the shard written last (`"later"`:
    a fault re-run after a harness fix, with --rerun-wins), or refused naming
    both (`"refuse"`)."""
    kept: dict[tuple, tuple[Path, SweepReport, RunResult]] = {}  # in first-seen order
    dropped = []
    for path, report in shards:
        for run in getattr(report, key):
            name = run_key(run.to_dict())
            if name not in kept:
                kept[name] = (path, report, run)
                continue
            if twice == "refuse":
                raise MergeError(
                    f"{path}: {run.fault} under {run.config} (repeat {run.repeat}) "
                    f"is in {kept[name][0]} too: its verdict would be ambiguous "
                    "(--rerun-wins keeps the later shard's)"
                )
            if twice == "later":
                earlier = kept[name]
                later = report.written > earlier[1].written
                if later:
                    kept[name] = (path, report, run)
                dropped.append(
                    {
                        "run": run.run_id,
                        "kept": str(kept[name][0]),
                        "dropped": str(earlier[0] if later else path),
                    }
                )
    return [run for _, _, run in kept.values()], dropped


def shard_line(path: Path, report: SweepReport) -> dict:
    return {
        "report": str(path),
        "written": report.written,
        "faults": len(report.faults),
        "wall_s": report.wall_s,
    }
