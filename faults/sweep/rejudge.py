"""Recorded runs judged again by today's rules, with no GPU
(docs/verdicts.md, "Judging recorded runs again").

A sweep report keeps each run's outcome: its exit, the lines the log named,
its markers and the digest of the tree that ran. When the verdict rules or
the static contract change, each run can be judged again from that outcome on
a freshly applied tree of the same digest, the contract checked there on the
CPU. A tree whose digest is not the one that ran is refused, naming the
fault: the fault or the sources changed since, and only a new run can say.
With `drop_changed` such a fault is dropped from the report instead, said in
the pass: a shard judged by an older catalog merges with the shards that run
the changed faults again (docs/verdicts.md, "Judging recorded runs again").
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from faults.catalog import Catalog
from faults.catalog.errors import FaultsError
from faults.judge.outcome import Outcome
from faults.judge.run_result import RunResult
from faults.judge.verdict import FaultSummary, judge, summarize_fault
from faults.pipeline.apply import ApplyError, apply_fault
from faults.pipeline.engine import AskedOnce
from faults.pipeline.scratch import target_scratch, tree_digest
from faults.report.document import SweepReport, catalog_sha256, now
from faults.schedules.ids import base_id, split_seed
from faults.schedules.over_seeds import report_schedules, summaries_over_seeds
from faults.schedules.seeds import with_seed
from invariants.sync.contract import static_contract
from invariants.sync.sites import SourceTree


class RejudgeError(FaultsError):
    """A report that cannot be judged again here: one line naming why."""


class TreeChanged(RejudgeError):
    """A fault whose tree today is not the tree that ran; `why` says so
    without the fault's name, which the error's text leads with."""

    def __init__(self, label: str, why: str) -> None:
        super().__init__(f"{label}: {why}")
        self.why = why


@dataclass(frozen=True)
class Change:
    run: str  # <fault>@<config>#<repeat>
    before: tuple[str, bool]  # verdict word, ok
    after: tuple[str, bool]

    def __str__(self) -> str:
        def said(verdict: str, ok: bool) -> str:
            return f"{verdict} ({'ok' if ok else 'not ok'})"

        return f"{self.run}: {said(*self.before)} -> {said(*self.after)}"


def seeded(catalog: Catalog, labels: list[str]) -> Catalog:
    """`catalog` with the seeded fault (`<fault>~s<seed>`) of every such label."""
    for label in labels:
        fault, seed = split_seed(label)
        if seed is not None:
            if fault not in catalog.faults:
                raise RejudgeError(f"fault {fault} (of {label}) is not in the catalog")
            catalog = with_seed(catalog, fault, seed)
    return catalog


def applied_tree(catalog: Catalog, root: Path, tree: Path, label: str) -> SourceTree:
    """Fault `label` applied in a scratch tree at `tree`; its sources."""
    if tree.exists():  # a --workdir reused
        shutil.rmtree(tree)
    sources = target_scratch(root, tree, catalog.target)
    try:
        apply_fault(sources, catalog, label)
    except ApplyError as error:
        raise RejudgeError(f"{label}: {error}") from None
    return sources


def rejudge_runs(
    catalog: Catalog, root: Path, workdir: Path, label: str, runs: list[RunResult]
) -> list[Change]:
    """`runs` (all of fault `label`) judged again in place; what changed."""
    tree = workdir / label / "tree"
    sources = applied_tree(catalog, root, tree, label)
    digest = tree_digest(sources.root)
    for run in runs:
        if run.tree_digest != digest:
            raise TreeChanged(
                label,
                f"its tree is now {digest[:12]}, the run's was {run.tree_digest[:12]}: "
                "the fault or the sources changed since, run it again",
            )
    guards = sources.guards()
    check = static_contract(catalog.target.annotated())  # its tree is a scratch tree
    contract = AskedOnce(check, tree, sources)  # asked of a survivor only, once per tree
    changes = []
    for run in runs:
        judgement = judge(
            catalog.fault(label),
            Outcome(**run.outcome),
            digest,
            patches=catalog.all_patches(label),
            guards=guards,
            contract=contract if check else None,
        )
        before, after = (run.verdict.value, run.ok), (judgement.verdict.value, judgement.ok)
        if before != after:
            changes.append(Change(f"{run.fault}@{run.config}#{run.repeat}", before, after))
        run.verdict, run.ok, run.reason = judgement.verdict, judgement.ok, judgement.reason
    return changes


def rejudge(
    report: SweepReport, catalog: Catalog, root: Path, workdir: Path, drop_changed: bool = False
) -> tuple[SweepReport, list[Change]]:
    """The report judged again (a new report) and what changed. Runs with no
    outcome (not applied, not built, erased, could not start) keep theirs.
    `drop_changed`: a fault whose tree changed leaves the report, its reason
    in the pass's `dropped`, instead of refusing the report."""
    if not report.harness_ok:
        raise RejudgeError("its harness was broken: no fault was judged, nothing to judge again")
    results = [replace(r) for r in report.results]  # judged again in place: the copies
    labels = list(dict.fromkeys(r.fault for r in results))
    catalog = seeded(catalog, labels)
    for label in labels:
        if label not in catalog.faults:
            raise RejudgeError(f"fault {label} is not in the catalog")
    changes, dropped = [], {}
    for label in labels:
        runs = [r for r in results if r.fault == label and r.outcome is not None]
        try:
            changes += rejudge_runs(catalog, root, workdir, label, runs) if runs else []
        except TreeChanged as error:
            if not drop_changed:
                raise
            was = next(s for s in report.faults if s.fault == base_id(label))
            dropped[was.fault] = {"why": error.why, "verdict": was.verdict.value, "ok": was.ok}
    results = [r for r in results if base_id(r.fault) not in dropped]
    labels = [label for label in labels if base_id(label) not in dropped]
    faults = [s.fault for s in report.faults if s.fault not in dropped]
    this_pass = {
        "written": now(),
        "catalog_sha256": catalog_sha256(catalog.path),
        "changes": [str(c) for c in changes],
        "dropped": dropped,
    }
    again = replace(
        report,
        results=results,
        faults=summaries(catalog, labels, faults, results),
        schedules=reseeded(report.schedules, catalog, labels, results),
        rejudged=[*report.rejudged, this_pass],  # every pass kept: what each changed stays said
    )
    return again, changes


def summaries(
    catalog: Catalog, labels: list[str], faults: list[str], results: list[RunResult]
) -> list[FaultSummary]:
    """Each fault over its runs, as the sweep summarized it: over its seeds
    when the runs are seeded, else over its configs and repeats."""
    if any(base_id(label) != label for label in labels):
        return summaries_over_seeds(catalog, labels, results)
    return [summarize_fault(catalog.fault(f), [r for r in results if r.fault == f]) for f in faults]


def reseeded(schedules: dict | None, catalog: Catalog, labels: list[str], results) -> dict | None:
    """Each seed's verdict, and the kill rates over them, again (None: no seeds)."""
    if not schedules:
        return schedules
    return report_schedules(catalog, labels, results, schedules["seeds"])
