"""The review's run half (--run): the change's own tree first, with no fault
and with the forced failure, under every config that fits here (where each
touched site fires, from the probes of faults/review/matrix.py), then the
faults covering the sites it touches, where they fire.
When the change's tree fails with no fault, BASE's tree runs too, to tell a
broken change (BASE passes) from a broken harness (BASE fails as well)
(docs/review.md, "The pre-merge review")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from faults.catalog import Catalog, Config, LogPatterns
from faults.catalog.refs import without_missing_sites
from faults.judge.run_result import RunResult
from faults.pipeline.engine import CLEAN, FORCED, Engine
from faults.pipeline.scratch import make_scratch
from faults.pipeline.slots import Job, phases, run_faults
from faults.review.coverage import Coverage
from faults.review.matrix import (
    ConfigPlan,
    Firing,
    config_plan,
    fault_configs,
    firing,
    probe_id,
    probed_sites,
    probes,
    real_size_configs,
)
from faults.review.progress import Listener, Tally
from hostio import gpu_count


# What a --run review says when no config runs here: it judged nothing.
NOTHING_RAN = "no config runs here (each needs more GPUs than are here): the runs judged nothing"


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
    plan: ConfigPlan = field(default_factory=lambda: ConfigPlan([]))
    firing: dict[str, Firing] = field(default_factory=dict)  # touched site -> where it fires
    # Covering faults with no config where all their sites fire: not run.
    unplaced: list[str] = field(default_factory=list)
    # Touched site (one that fires) -> each kind of its covering faults none
    # of which ran (all unplaced): no run covers it that way.
    unrun: dict[str, list[str]] = field(default_factory=dict)
    must_fail: frozenset[str] = frozenset()  # the covering faults expected to fail

    @property
    def unfired(self) -> list[Firing]:
        """The touched sites no config that ran executes: no run covers them."""
        return [fired for fired in self.firing.values() if fired.uncovered]

    @property
    def wrong_faults(self) -> list[RunResult]:
        """The covering faults' runs that are wrong: each run of a must-pass
        fault that did not pass, and every run of a must-fail fault that no
        run killed (the sweep's rule: one kill is a kill, so a must-fail
        fault's runs before its first kill are no fault of the change)."""
        killed = {r.fault for r in self.faults if r.fault in self.must_fail and r.ok}
        return [r for r in self.faults if not r.ok and r.fault not in killed]

    @property
    def killed_elsewhere(self) -> list[RunResult]:
        """A must-fail fault's runs that did not kill it, before the one that did."""
        wrong = self.wrong_faults
        return [r for r in self.faults if not r.ok and r not in wrong]

    @property
    def ran_nothing(self) -> bool:
        """No config runs here (each needs more GPUs than are here): the
        change's tree never ran, so the runs judged nothing."""
        return not self.controls

    @property
    def ok(self) -> bool:
        return (
            not self.ran_nothing
            and not self.change_fails
            and not self.harness_broken
            and not self.unfired
            and not self.unrun
            and all(r.ok for r in self.controls)
            and not self.wrong_faults
        )


def unrun_gaps(touched: list[Coverage], report: RunReport) -> dict[str, list[str]]:
    """Each touched site that fires whose must-pass faults, or must-fail
    faults, all ran under no config (their sites fire together under none
    here): the static coverage rule, asked of the faults that ran. A site
    that never fires is said once, as such."""
    gaps: dict[str, list[str]] = {}
    for cover in touched:
        if report.firing[cover.site.name].uncovered:
            continue
        for kind, ids in (("must-pass", cover.passing), ("must-fail", cover.failing)):
            if ids and all(fault_id in report.unplaced for fault_id in ids):
                gaps.setdefault(cover.site.name, []).append(
                    f"no {kind} fault ran: {', '.join(ids)} "
                    "(their sites fire together under no config here)"
                )
    return gaps


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


def stage_listener(tally: Tally, tree: str, forced: bool) -> Callable[[RunResult], None]:
    """Each control run as it lands; a failed clean run takes its config's
    forced failure out of the plan (it does not run)."""
    landed = tally.ran(tree)

    def on_result(result: RunResult) -> None:
        if forced and result.fault == CLEAN and not result.ok:
            tally.unplan(1)
        landed(result)

    return on_result


def change_controls(
    engine: Engine,
    configs: list[Config],
    what: str,
    tally: Tally,
    slots: int,
    then: Callable[[RunResult], list[Config]] | None = None,
) -> list[RunResult]:
    """The change's tree, clean then with the forced failure, under `configs`
    (their names end what the progress says), and `then`'s configs clean (the
    real-size configs); none: nothing to plan or build."""
    if not configs:
        return []
    forced = bool(engine.catalog.control)
    tally.plan(f"{what}: {', '.join(c.name for c in configs)}", len(configs) * (2 if forced else 1))
    listener = stage_listener(tally, "change", forced)
    return engine.controls(configs, slots, listener, then=then)


def real_size_where_fired(
    catalog: Catalog, touched: list[str], tally: Tally
) -> Callable[[RunResult], list[Config]]:
    """Given a clean run that passed, the real-size config of its config when a
    touched site fired there (its probe's marker), each planned as it is
    found: they run clean alone, the forced failure checking the harness per
    config, which its real-size config (the same config, larger) shares."""

    def found(result: RunResult) -> list[Config]:
        markers = result.outcome["markers"] if result.outcome else {}
        if not any(markers.get(probe_id(site), 0) for site in touched):
            return []
        exposed = real_size_configs(catalog, [result.config])
        if exposed:
            what = "the change's clean tree under the real-size config of a config where it fires"
            tally.plan(f"{what}: {', '.join(c.name for c in exposed)}", len(exposed))
        return exposed

    return found


def killers_first(catalog: Catalog, fault_id: str, configs: list[Config]) -> list[Config]:
    """A must-fail fault's `configs`, those the catalog runs it under in the
    sweep first (where it is known to be killed; they only order, never
    choose), the others after, each group in the plan's order."""
    own = {c.name for c in catalog.configs_for(fault_id)}
    return [c for c in configs if c.name in own] + [c for c in configs if c.name not in own]


def covering_jobs(catalog: Catalog, chosen: dict[str, list[Config]]) -> list[Job]:
    """The covering faults' jobs: a must-pass fault runs under all its
    configs, each run a job of its own, so that a few faults under many
    configs fill every slot (config by config: every tree is wanted early); a
    must-fail fault is one job, its configs run one by one, the catalog's own
    first (its first kill ends them)."""
    placed = {f: configs for f, configs in chosen.items() if configs}
    failing = [f for f in placed if catalog.fault(f).expect == "fail"]
    passing = [f for f in placed if f not in failing]
    names = list(dict.fromkeys(c.name for f in passing for c in placed[f]))
    return [
        *(Job(f, (c,)) for name in names for f in passing for c in placed[f] if c.name == name),
        *(Job(f, tuple(killers_first(catalog, f, placed[f]))) for f in failing),
    ]


def run_faults_where_they_fire(
    engine: Engine, chosen: dict[str, list[Config]], tally: Tally, slots: int
) -> list[RunResult]:
    """The covering faults through the sweep's phases (must-fail faults under
    a delay alone), each under its own configs, each run said as it lands. A
    must-fail fault is judged as the sweep judges it, killed once any run
    kills it: its configs run one by one, and its first kill ends them (the
    rest would not change its verdict); a must-pass fault runs under all,
    `slots` runs at a time."""
    ids = [fault_id for fault_id, configs in chosen.items() if configs]
    if not ids:
        return []
    catalog = engine.catalog
    runs = sum(len(chosen[fault_id]) for fault_id in ids)
    tally.plan(f"the covering faults, each where its sites fire: {', '.join(ids)}", runs)
    landed = tally.ran("change")

    def evaluate(engine: Engine, job: Job) -> list[RunResult]:
        must_fail = catalog.fault(job.fault).expect == "fail"
        found = []
        for done, config in enumerate(job.configs, start=1):  # one at a time, each said as it lands
            [result] = engine.evaluate(job.fault, [config])
            killed = must_fail and result.ok
            if killed:  # before it lands, so that what is left is said right
                tally.unplan(len(job.configs) - done)
            landed(result)
            found.append(result)
            if killed:
                break
        return found

    jobs = covering_jobs(catalog, chosen)
    results = run_faults(phases([engine], catalog, jobs, slots), evaluate, no_batch, None)
    # Fault by fault, each fault's runs in its jobs' order (a must-fail fault's as they ran).
    planned = {(job.fault, c.name): i for i, job in enumerate(jobs) for c in job.configs}
    order = {fault_id: i for i, fault_id in enumerate(ids)}
    return sorted(results, key=lambda r: (order[r.fault], planned[r.fault, r.config]))


def no_batch(found: list[RunResult]) -> None:
    """The sweep's per-fault batches: each run was said already."""


def run_review(
    touched: list[Coverage],
    catalog: Catalog,
    tree: Path,
    repo_root: Path,
    base: str,
    workdir: Path,
    slots: int = 1,
    listener: Listener | None = None,
    chosen: str = "",
) -> RunReport:
    """Controls first, on every config of the matrix that fits here (a
    harness that fails everything cannot pass its must-fail faults off as
    KILLED, and a change that fails with no fault is said before any fault is
    judged), their clean runs carrying a probe at each site the review needs
    to see, and with them the real-size config of each config whose clean run
    shows a touched site firing (started as that run lands, in the same
    slots: a stage of its own waited for the slowest control); then each
    covering fault where its sites fire. `slots`: runs at a
    time for the controls and the must-pass faults (the sweep's --slots);
    `listener`: each stage and run as it happens (faults/review/progress.py);
    `chosen`: how the catalog's configs were chosen (its [matrix], in words)."""
    tally = Tally(listener)
    plan = config_plan(catalog, gpu_count(), chosen)
    sites = probed_sites(catalog, touched)
    engine = Engine(
        catalog, tree, workdir / "change", probes=probes(catalog, sites), runs_at_once=slots
    )
    what = "the change's tree, clean then with the forced failure, under every config here"
    names = [cover.site.name for cover in touched]
    then = real_size_where_fired(catalog, names, tally)
    try:
        controls = change_controls(engine, plan.run, what, tally, slots, then)
        report = RunReport(controls, [], [], [], [], plan=plan)
        fires = firing(sites, controls)
        report.firing = {name: fires[name] for name in names}
        if all(r.ok for r in controls):
            ran = {r.config for r in controls}
            exposed = [c for c in catalog.configs if c.base and c.name in ran]
            chosen = fault_configs(catalog, touched, fires, [*plan.run, *exposed])
            report.unplaced = [fault_id for fault_id, configs in chosen.items() if not configs]
            report.unrun = unrun_gaps(touched, report)
            report.must_fail = frozenset(f for f in chosen if catalog.fault(f).expect == "fail")
            report.faults = run_faults_where_they_fire(engine, chosen, tally, slots)
    finally:
        engine.close()
    judge_controls(report, catalog, repo_root, base, workdir, tally, slots)
    return report


def base_catalog(catalog: Catalog, repo_root: Path, base: str, workdir: Path) -> Catalog:
    """The catalog BASE's clean runs take: without its forced failure (the
    clean control alone), and with only the anchored sites BASE's sources
    hold: a change that adds an anchored site declares an anchor BASE lacks."""
    catalog = replace(catalog, control=())
    if not catalog.target.anchors:
        return catalog
    tree = make_scratch(repo_root, workdir / "base-sources", ref=base)
    return without_missing_sites(catalog, tree / catalog.target.sources)[0]


def judge_controls(
    report: RunReport,
    catalog: Catalog,
    repo_root: Path,
    base: str,
    workdir: Path,
    tally: Tally,
    slots: int,
) -> None:
    """Whose fault a wrong control is: the change's when BASE's tree passes
    with no fault under the config the change failed, else the harness's."""
    log = catalog.target.log
    controls = report.controls
    failed = {r.config: r for r in controls if r.fault == CLEAN and not r.ok}
    # The forced failure on a tree that already fails with no fault says
    # nothing of the harness (it may hang where the change hangs).
    report.harness_broken = [
        "the harness is broken: the forced-fail control was not killed: "
        f"{r.verdict}: {r.reason.splitlines()[0]} (config {r.config})"
        for r in controls
        if r.fault == FORCED and not r.ok and r.config not in failed
    ]
    if not failed:
        return
    # BASE's tree with no fault, under the configs the change failed.
    on_base = base_catalog(catalog, repo_root, base, workdir)
    engine = Engine(on_base, repo_root, workdir / "base", ref=base, runs_at_once=slots)
    tally.plan(f"BASE's tree, clean, under the {len(failed)} configs the change fails", len(failed))
    try:
        report.base_clean = engine.controls(
            [c for c in catalog.configs if c.name in failed], slots, tally.ran("BASE")
        )
    finally:
        engine.close()
    for base_run in report.base_clean:
        mine = failed[base_run.config]
        # The control's own reason blames the harness; the runs listed
        # in the report say which tree is at fault instead.
        if base_run.ok:
            failure = CleanFailure(mine.config, first_failure(mine, log), log_path(mine))
            report.change_fails.append(failure)
            mine.reason = f"the change fails the driver: {failure.line}"
        else:
            where = f"; log: {log_path(base_run)}" if log_path(base_run) else ""
            report.harness_broken.append(
                "the harness is broken: BASE's tree fails the driver too, with no fault: "
                f"{first_failure(base_run, log)} (config {base_run.config}{where})"
            )
            mine.reason = "BASE's tree fails too: the harness is broken"
