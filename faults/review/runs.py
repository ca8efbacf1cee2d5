"""The review's run half (--run): the change's own tree first, with no fault
and with the forced failure, then the faults covering the sites it touches.
When the change's tree fails with no fault, BASE's tree runs too, to tell a
broken change (BASE passes) from a broken harness (BASE fails as well)
(docs/review.md, "The pre-merge review")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from faults.catalog import Catalog, LogPatterns
from faults.pipeline.engine import CLEAN, FORCED, Engine, RunResult
from faults.pipeline.slots import sweep
from faults.review.coverage import Coverage
from hostio import gpu_count


@dataclass(frozen=True)
class CleanFailure:
    """The change's tree failing the driver with no fault, under one config."""

    config: str
    line: str  # the log's first line naming a failure, or why no run happened
    log: str  # the log's path; "" when nothing ran

    def __str__(self) -> str:
        log = f"; log: {self.log}" if self.log else ""
        return f"the change fails the driver: {self.line} (config {self.config}{log})"


@dataclass
class RunReport:
    controls: list[RunResult]  # on the change's tree: clean, then forced failure
    faults: list[RunResult]  # the covering faults (none when a control was wrong)
    change_fails: list[CleanFailure]  # the change's tree fails, BASE's passes
    harness_broken: list[str]  # BASE's tree fails too, or the forced failure was not killed
    base_clean: list[RunResult]  # BASE's tree with no fault ([]: not run, not needed)

    @property
    def ok(self) -> bool:
        return (
            not self.change_fails
            and not self.harness_broken
            and all(r.ok for r in [*self.controls, *self.faults])
        )


def first_failure(result: RunResult, log: LogPatterns) -> str:
    """What a failed run said first: the first log line a failure pattern
    matches; else how it ended."""
    outcome = result.outcome
    if outcome is None:  # it did not build, or could not start
        return f"{result.verdict}: {result.reason.splitlines()[0]}"
    if outcome["outer_timeout"]:
        limit = "" if outcome["timeout_s"] is None else f" ({outcome['timeout_s']:g} s)"
        return f"the outer timeout{limit} ended the run: it hangs"
    path = Path(outcome["log_path"])
    lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
    patterns = (log.mismatch, log.timeout, log.assertion, log.device_error)
    for line in lines:
        if any(pattern.search(line) for pattern in patterns):
            return line.strip()
    if outcome["exit_code"] == 0:  # it passed, yet not as the tree that was built
        return f"{result.verdict}: {result.reason}"
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return f"exit {outcome['exit_code']} with no line naming a failure" + (
        f"; its last line: {last}" if last else ""
    )


def log_path(result: RunResult) -> str:
    return result.outcome["log_path"] if result.outcome else ""


def review_configs(catalog: Catalog, fault_ids: list[str], gpus: int) -> list[str]:
    """The configs the review runs: those its covering faults run under (their
    controls say whether the change passes there and whether a failure would
    be seen), else every config; only those that fit the GPUs here."""
    wanted = {c.name for f in fault_ids for c in catalog.configs_for(f)}
    return [
        c.name
        for c in catalog.configs
        if (not wanted or c.name in wanted) and catalog.gpus_for(c) <= gpus
    ]


def run_review(
    touched: list[Coverage],
    catalog: Catalog,
    tree: Path,
    repo_root: Path,
    base: str,
    workdir: Path,
    slots: int = 1,
) -> RunReport:
    """Through the sweep, controls first: a harness that fails everything
    cannot pass its must-fail faults off as KILLED, and a change that fails
    with no fault is said before any fault is judged. `slots`: runs at a time
    for the controls and the must-pass faults (the sweep's --slots)."""
    ids = list(dict.fromkeys(fault for cover in touched for fault in cover.faults))
    gpus = gpu_count()
    fits = review_configs(catalog, ids, gpus)
    controls, faults = sweep(
        [Engine(catalog, tree, workdir / "change")], ids, fits, 1, lambda _: None, slots=slots
    )
    log = catalog.target.log
    failed = {r.config: r for r in controls if r.fault == CLEAN and not r.ok}
    # The forced failure on a tree that already fails with no fault says
    # nothing of the harness (it may hang where the change hangs).
    harness_broken = [
        "the harness is broken: the forced-fail control was not killed: "
        f"{r.verdict}: {r.reason.splitlines()[0]} (config {r.config})"
        for r in controls
        if r.fault == FORCED and not r.ok and r.config not in failed
    ]
    change_fails, base_clean = [], []
    if failed:
        # BASE's tree with no fault, under the configs the change failed: the
        # catalog without its forced failure runs the clean control alone.
        engine = Engine(replace(catalog, control=()), repo_root, workdir / "base", ref=base)
        base_clean = engine.controls([c for c in catalog.configs if c.name in failed], slots)
        for base_run in base_clean:
            mine = failed[base_run.config]
            # The control's own reason blames the harness; the runs listed
            # in the report say which tree is at fault instead.
            if base_run.ok:
                failure = CleanFailure(mine.config, first_failure(mine, log), log_path(mine))
                change_fails.append(failure)
                mine.reason = f"the change fails the driver: {failure.line}"
            else:
                where = f"; log: {log_path(base_run)}" if log_path(base_run) else ""
                harness_broken.append(
                    "the harness is broken: BASE's tree fails the driver too, with no fault: "
                    f"{first_failure(base_run, log)} (config {base_run.config}{where})"
                )
                mine.reason = "BASE's tree fails too: the harness is broken"
    return RunReport(controls, faults, change_fails, harness_broken, base_clean)
