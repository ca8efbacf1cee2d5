"""The sweep report: one summary line per run, and one document per sweep
(SweepReport), the one type that `sweep` and `run --report` write, a shard
is, `merge` makes of shards, `rejudge` judges again and `compare` reads
(docs/tools.md, "Sharded sweeps"). Its derived figures (ok, the
mutation score by family, the firing rate, stage seconds, the engine's share,
the summary lines) are computed here, once, from its runs and summaries."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from faults.catalog import Catalog, Config
from faults.catalog.errors import FaultsError
from faults.judge.run_result import RunResult
from faults.judge.scores import family_scores, scores
from faults.judge.verdict import FaultSummary, Verdict
from faults.report.markdown import junit, markdown
from hostio import CPU_MACHINE, RankMode, machine_name, results_stem, write_json, write_text

# Verdicts that meet their expectation yet say why: a known survivor, a
# survivor the static contract catches.
SAID_IN_FULL = (Verdict.SURVIVED, Verdict.UNOBSERVABLE)


def summary_line(result: RunResult) -> str:
    """The line starts with the run id `replay` takes (faults/schedules/ids.py)."""
    name = result.run_id
    outcome = result.outcome
    if outcome is None:
        return (
            f"{name} tree={result.tree_digest[:8] or '-'} {result.verdict}: "
            f"{(result.reason.splitlines() or ['-'])[0]}"
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


def catalog_sha256(path) -> str:
    """The catalog a report judged by: faults change, so reports say which."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ReportError(FaultsError):
    """A file that is not a sweep report: one line naming it and why."""


# What every report holds; an older report may lack the rest, read as empty
# (a merged report then lacks them too).
REQUIRED = ("results",)


@dataclass
class SweepReport:
    """One sweep's report. The stored fields are its record; `to_json` adds
    the figures derived from them."""

    catalog: str = ""
    catalog_sha256: str = ""
    target: str = ""  # the catalog's target's name ("" in a report from before it)
    machine: str = ""
    native_source_sha256: str = ""  # the user's tree, before and after (its sources' digest)
    rank_mode: str = str(RankMode.PER_GPU)
    tool: str = "faults.sweep"
    written: str = field(default_factory=now)
    controls: list[RunResult] = field(default_factory=list)
    results: list[RunResult] = field(default_factory=list)
    faults: list[FaultSummary] = field(default_factory=list)  # each fault over its runs
    harness_ok: bool | None = None  # its controls were right; None: it ran none (`run`)
    runnable: bool = True  # the machine ran the target (else every fault was built only)
    gpus_needed: dict[str, int] = field(default_factory=dict)  # config -> GPUs a run needs
    logical_ranks: bool = False  # the target can put every rank on one GPU
    wall_s: float = 0.0
    slots: int | None = None
    # Seconds per stage; None: summed from the runs (a merge keeps each shard's sum).
    stage_seconds: dict[str, float] | None = None
    sites: list[str] = field(default_factory=list)
    only: list[str] = field(default_factory=list)  # --only's patterns: a partial sweep
    budget_s: float | None = None
    unrun: list[str] = field(default_factory=list)  # the faults the budget left
    matrix: str = ""  # a matrix sweep's: how the [matrix]'s points were chosen, in words
    firing: dict[str, str] = field(default_factory=dict)  # a matrix sweep's: site -> where it fires
    unplaced: list[str] = field(default_factory=list)  # matrix: sites fire together nowhere
    schedules: dict | None = None  # with --seeds: each seed's run, the kill rates
    built: list[dict] = field(default_factory=list)  # without the GPUs: each fault's tree
    configs_not_run: dict[str, str] = field(default_factory=dict)
    gpu_runs_needed: list[str] = field(default_factory=list)
    changes: dict | None = None  # since the history's last sweep of the target
    # merge: the catalog's faults in no shard, each shard, the runs a rerun replaced
    not_selected: list[str] | None = None
    shards: list[dict] | None = None
    superseded: list[dict] | None = None
    rejudged: list[dict] = field(default_factory=list)  # every rejudge pass, the latest last

    @property
    def ok(self) -> bool:
        """The harness right (or not run), no fault left unrun (nor, in a matrix
        sweep, placed under no config), and every fault
        (every run, for `run`, which summarizes none) met its expectation; a
        sweep with no GPU for its runs: every tree built as it should (what
        its exit status says too)."""
        if self.runnable is False:
            return bool(self.built) and all(b["ok"] for b in self.built)
        judged = self.faults or self.results
        left_out = self.unrun or self.unplaced
        return self.harness_ok is not False and not left_out and all(r.ok for r in judged)

    def seconds(self) -> dict[str, float]:
        if self.stage_seconds is not None:
            return self.stage_seconds
        return stage_seconds([*self.controls, *self.results])

    def judged_by(self) -> str:
        """The sha256 of the catalog whose rules gave its verdicts: its last
        `rejudge` pass's, else the sweep's."""
        return self.rejudged[-1]["catalog_sha256"] if self.rejudged else self.catalog_sha256

    @property
    def partial(self) -> bool:
        """A sweep of the faults --only chose, or a merge of shards that left
        some of the catalog's faults out."""
        return bool(self.only or self.not_selected)

    def stem(self, results_dir: Path) -> Path:
        """`sweep-<machine>[-logical]` under `results_dir`: a one-GPU report never
        takes a per-GPU one's name. A CPU report, which every catalog's sweep
        files under one folder, also names its target and, `-partial`, a
        partial sweep: `sweep-cpu-afdep`, `sweep-cpu-flag_payload-partial`, so
        neither another catalog's sweep nor a partial one replaces it."""
        qualifiers: tuple[str, ...] = ()
        if self.machine == CPU_MACHINE:
            qualifiers = (self.target, "partial" if self.partial else "")
        return Path(results_dir) / results_stem("sweep", self.machine, self.rank_mode, qualifiers)

    def to_json(self) -> dict:
        mutation, firing = scores(self.faults)
        stages = self.seconds()
        document = {f.name: getattr(self, f.name) for f in fields(self)}
        document.update(
            controls=[r.to_dict() for r in self.controls],
            results=[r.to_dict() for r in self.results],
            faults=[{**asdict(s), "verdict": s.verdict.value} for s in self.faults],
            ok=self.ok,
            mutation_score=mutation,
            mutation_score_by_family=family_scores(self.faults),
            firing_rate=firing,
            stage_seconds=stages,
            engine_share=engine_share(stages),
            summary=[summary_line(r) for r in (*self.controls, *self.results)],
        )
        return document

    @classmethod
    def from_json(cls, document, needed=REQUIRED, reader: str = "") -> SweepReport:
        """A report read back; ReportError when it is not one, or lacks a key
        of `needed` (what `reader`, a command, cannot do without). Derived
        figures are computed again, not read."""
        if not isinstance(document, dict) or not isinstance(document.get("results"), list):
            raise ReportError("not a sweep report (no results list)")
        missing = next((key for key in needed if key not in document), None)
        if missing is not None:
            can = f" {reader} can read" if reader else ""
            raise ReportError(f"not a sweep report{can} (no {missing})")
        stored = {f.name: document[f.name] for f in fields(cls) if f.name in document}
        try:
            stored.update(
                controls=[RunResult(**r) for r in document.get("controls", [])],
                results=[RunResult(**r) for r in document["results"]],
                faults=[FaultSummary(**s) for s in document.get("faults", [])],
            )
            return cls(**stored)
        except (TypeError, ValueError) as error:
            raise ReportError(f"not a sweep report ({error})") from None


def run_report(
    catalog_path: Path,
    catalog: Catalog,
    configs: list[Config],
    results: list[RunResult],
    native_source_sha256: str,
    wall_s: float,
) -> SweepReport:
    """What `run --report` writes: one fault's runs under `configs` on this
    machine, no controls (`run` runs none: the harness is not checked)."""
    return SweepReport(
        catalog=str(catalog_path),
        catalog_sha256=catalog_sha256(catalog_path),
        target=catalog.target.name,
        machine=machine_name(),
        native_source_sha256=native_source_sha256,
        rank_mode=str(catalog.rank_mode),
        tool="faults.run",
        results=results,
        harness_ok=None,
        gpus_needed={c.name: catalog.gpus_for(c) for c in configs},
        logical_ranks=bool(catalog.target.logical_run),
        wall_s=round(wall_s, 3),
    )


def read_report(path: Path, needed=REQUIRED, reader: str = "") -> SweepReport:
    """The report in `path`; ReportError naming why it is not one (needed,
    reader: as SweepReport.from_json)."""
    try:
        document = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ReportError("no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ReportError(f"not a JSON report ({error})") from None
    return SweepReport.from_json(document, needed, reader)


def write_report(results_dir: Path, report: SweepReport) -> Path:
    """The report's JSON, Markdown and JUnit, each written whole; their stem."""
    stem = report.stem(results_dir)
    document = report.to_json()
    write_json(stem.with_suffix(".json"), document)
    write_text(stem.with_suffix(".md"), markdown(document))
    write_text(stem.with_suffix(".xml"), junit(document))
    return stem
