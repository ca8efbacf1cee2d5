"""The sweep: the catalog's faults (and those generated from every site) over
its configs, controls first, in parallel over GPU groups; reports in JSON,
Markdown and JUnit, and a SQLite history that says what changed since the
last sweep of the target. With fewer GPUs than the target needs, every fault
is applied and built and the runs that need GPUs are listed.

A `Sweep` goes plan -> run -> record -> write (docs/tools.md, "The
sweep"); `plan` refuses bad input before any tree is built.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from faults.catalog import Catalog, CatalogError, Config
from faults.judge.run_result import RunResult
from faults.judge.verdict import FaultSummary, summarize_fault
from faults.pipeline.engine import Engine, TreeContract
from faults.pipeline.erasure import ErasedDecision, erasure_baseline
from faults.pipeline.run import overridden_env
from faults.pipeline.scratch import UserTreeGuard
from faults.pipeline.slots import sweep
from faults.report.document import SweepReport, catalog_sha256, summary_line, write_report
from faults.review.matrix import Firing, firing, patched_sites, probes, where_all_fire
from faults.schedules.over_seeds import report_schedules, summaries_over_seeds
from faults.schedules.seeds import with_seeds
from faults.sweep.history import History
from faults.sweep.selection import (
    SweepError,
    check_history,
    covered_by_catalog,
    select_configs,
    select_faults,
)
from hostio import (
    RESULTS_DIR,
    gpu_group,
    machine_name,
    refuse_output,
    writable_dir,
)
from invariants.sync.sites import parse_tree

CPU_RESULTS = Path("build/faults")  # a sweep that judges nothing files its report here


@dataclass
class SweepOptions:
    only: list[str] | None = None  # regular expressions, each matching a whole fault id
    configs: list[str] | None = None
    repeat: int = 1
    slots: int = 1
    results_dir: Path | None = None
    history: Path | None = None
    # A tree's static contract violations, for UNOBSERVABLE (None: invariants.sync.contract's).
    contract: TreeContract | None = None
    exposure: bool = True  # each config's real-size config too ([exposure], when the catalog has it)
    # Whether the compiler erased a fault (None: the catalog's [target.sass] check).
    erased: ErasedDecision | None = None
    # Each scheduled fault once per seed, as `<fault>~s<seed>` (empty: as written).
    seeds: tuple[int, ...] = ()
    # Past this many seconds from the start no fault starts (None: no limit);
    # the report lists the faults not run, so a next shard can take them.
    budget_s: float | None = None
    # The catalog's [matrix] points for its configs, each fault run under every
    # point where all its sites fire (probed in the clean controls).
    matrix: bool = False


@dataclass
class Sweep:
    catalog: Catalog
    root: Path
    workdir: Path
    options: SweepOptions
    fault_ids: list[str]
    configs: list[Config]  # those this machine runs (all, when it runs none)
    too_big: list[Config]  # configs needing more GPUs than this machine has
    runnable: bool
    gpus: int
    results_dir: Path
    history_path: Path
    machine: str = ""
    sites: list[str] = field(default_factory=list)
    controls: list[RunResult] = field(default_factory=list)
    results: list[RunResult] = field(default_factory=list)
    built: list[dict] = field(default_factory=list)  # without the GPUs: each fault built
    user_digest: str = ""
    wall_s: float = 0.0
    unrun: list[str] = field(default_factory=list)  # the faults the budget left out
    matrix: str = ""  # with --matrix: how its points were chosen, in words
    firing: dict[str, Firing] = field(default_factory=dict)  # with --matrix: site -> where
    unplaced: list[str] = field(default_factory=list)  # with --matrix: sites fire together nowhere

    # ------------------------------------------------------------------ plan
    @classmethod
    def plan(
        cls, catalog: Catalog, root: Path, workdir: Path, options: SweepOptions, gpus: int
    ) -> Sweep:
        """Everything the sweep will do, or a SweepError naming the argument at fault."""
        chosen = ""
        if options.matrix:
            catalog, chosen = catalog.on_matrix()
            if not chosen:
                raise SweepError(f"--matrix: the catalog {catalog.path} has no [matrix]")
            catalog = catalog.unpinned()
        if options.exposure:
            catalog = catalog.with_exposure()
        fault_ids = select_faults(catalog, options.only)
        try:
            catalog, fault_ids = with_seeds(catalog, fault_ids, options.seeds)
        except CatalogError as error:
            raise SweepError(str(error)) from None
        configs = select_configs(catalog, options.configs)
        too_big = [c for c in configs if catalog.gpus_for(c) > gpus]
        runnable = len(too_big) < len(configs)
        if runnable:
            configs = [c for c in configs if c not in too_big]
            names = [c.name for c in configs]
            fault_ids = [f for f in fault_ids if catalog.configs_for(f, names)]
            if not fault_ids:
                raise SweepError(
                    f"no chosen fault runs under the configs this machine runs ({', '.join(names)})"
                )
        else:
            too_big = []
        default = RESULTS_DIR if runnable and catalog.target.gpus else CPU_RESULTS
        results_dir = options.results_dir or root / default
        sources = [root / catalog.target.sources]
        refuse_output(results_dir, "--results-dir", sources)  # the defaults too
        history = options.history or results_dir / "sweep-history.sqlite"
        refuse_output(history, "--history", sources)
        writable_dir(results_dir, "--results-dir")
        writable_dir(history.parent, "--history")
        check_history(history)
        return cls(
            catalog,
            root,
            workdir,
            options,
            fault_ids,
            configs,
            too_big,
            runnable,
            gpus,
            results_dir,
            history,
            machine=machine_name(),
            sites=[
                s.name
                for s in parse_tree(root / catalog.target.sources, catalog.target.anchors)[0]
            ],
            matrix=chosen,
        )

    # ------------------------------------------------------------------- run
    def run(self, say: Callable[[str], None], advance: Callable[[], None]) -> None:
        started = time.perf_counter()
        budget = self.options.budget_s
        deadline = None if budget is None else time.monotonic() + budget
        overridden = overridden_env(self.catalog.target)
        if overridden:
            say(overridden)
        with UserTreeGuard(self.root / self.catalog.target.sources) as guard:
            if self.runnable:
                say(f"rank mode: {self.catalog.rank_mode} ({self.machine})")
                self._run_faults(say, advance, deadline)
            else:
                self._build_faults(say, advance)
        self.user_digest = guard.before
        self.wall_s = time.perf_counter() - started

    def _build_faults(self, say, advance) -> None:
        """No GPUs for the target: apply and build every fault (the clean tree
        first: if it does not build, no fault can)."""
        needs: dict[int, list[str]] = {}
        for config in self.configs:
            needs.setdefault(self.catalog.gpus_for(config), []).append(config.name)
        by_count = "; ".join(f"{n} for {', '.join(names)}" for n, names in sorted(needs.items()))
        found = "no GPU" if not self.gpus else f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}"
        say(
            f"{found} found: applying and building every fault only, no run; "
            f"its {len(self.needed_runs())} runs need GPUs ({by_count}), listed in the report"
        )
        engine = Engine(self.catalog, self.root, self.workdir, erased=self.options.erased)
        clean = engine.prepare("control.clean")
        if clean.error:
            say(f"the unpatched tree does not build: {clean.error.reason.splitlines()[0]}")
            self.built.append(built_row("control.clean", clean))
            return
        baseline_s = erasure_baseline(engine.erased)  # once, not in the first fault's seconds
        say(f"control.clean tree={clean.digest[:8]} (erasure check's baseline {baseline_s:.2f} s)")
        for fault_id in self.fault_ids:
            prepared = engine.prepare(fault_id, fault_id)
            row = built_row(fault_id, prepared)
            why = f": {row['reason'].splitlines()[0]}" if row["reason"] else ""
            say(
                f"{fault_id} tree={prepared.digest[:8]} {row['state']}"
                f" (apply {prepared.apply_s:.2f} s, build {prepared.build_s:.2f} s,"
                f" sass {prepared.sass_s:.2f} s){why}"
            )
            self.built.append(row)
            advance()

    def _run_faults(self, say, advance, deadline: float | None) -> None:
        for config in self.too_big:
            say(f"not run here: config {config.name} needs {self.catalog.gpus_for(config)} GPUs")

        def on_results(found: list[RunResult]) -> None:
            for result in found:
                say(summary_line(result))
            if found and found[0].fault in self.fault_ids:
                advance()

        engines = self.engines()
        placing = self.place_where_fired if self.matrix else None
        try:
            self.controls, self.results = sweep(
                engines,
                self.fault_ids,
                [c.name for c in self.configs],
                self.options.repeat,
                on_results,
                slots=self.options.slots,
                deadline=deadline,
                placing=placing,
            )
        finally:
            for engine in engines:
                engine.close()
        if not self.harness_ok:
            say("HARNESS BROKEN: a control is wrong, no fault is judged")
            return
        if deadline is None:  # without a budget every fault ran: nothing is left over
            return
        ran = {r.fault for r in self.results}
        self.unrun = [f for f in self.fault_ids if f not in ran and f not in self.unplaced]
        if self.unrun:
            say(
                f"the {self.options.budget_s:g} s budget is spent: {len(self.unrun)} faults "
                f"not run; the next shard: --only '{'|'.join(map(re.escape, self.unrun))}'"
            )

    def place_where_fired(self, controls: list[RunResult]) -> dict[str, list[Config]]:
        """A matrix sweep's faults, each under the configs whose clean control
        fired every site it patches (its probes' markers; where_all_fire)."""
        self.firing = firing(patched_sites(self.catalog, self.fault_ids), controls)
        names = [c.name for c in self.configs]
        placed = {
            fault_id: where_all_fire(
                self.catalog, fault_id, self.firing, self.catalog.configs_for(fault_id, names)
            )
            for fault_id in self.fault_ids
        }
        self.unplaced = [f for f, configs in placed.items() if not configs]
        return placed

    def engines(self) -> list[Engine]:
        """One engine per GPU group of the largest config (the caller's
        CUDA_VISIBLE_DEVICES holds), each run with its share of the CPU's
        threads (every group's slots run at once); in a matrix sweep the
        clean tree carries a probe at each patched site."""
        size = max(self.catalog.gpus_for(c) for c in self.configs)
        checks = dict(contract=self.options.contract, erased=self.options.erased)
        if self.matrix:
            sites = patched_sites(self.catalog, self.fault_ids)
            checks.update(probes=probes(self.catalog, sites))
        groups = max(self.gpus // size, 1) if size else 1
        checks.update(runs_at_once=groups * self.options.slots)
        if not size:
            return [Engine(self.catalog, self.root, self.workdir / "group0", **checks)]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        devices = [gpu_group(i, size, visible, self.gpus) for i in range(groups)]
        return [
            Engine(
                self.catalog,
                self.root,
                self.workdir / f"group{i}",
                env={"CUDA_VISIBLE_DEVICES": ",".join(group)},
                **checks,
            )
            for i, group in enumerate(devices)
        ]

    @property
    def harness_ok(self) -> bool:
        return self.runnable and bool(self.controls) and all(r.ok for r in self.controls)

    # ---------------------------------------------------------------- record
    def summaries(self) -> list[FaultSummary]:
        if not self.harness_ok:  # with a wrong control no fault ran: nothing to summarize
            return []
        if self.options.seeds:  # a catalog fault over its seeds, as over repeats
            judged = [f for f in self.fault_ids if f not in self.unrun]
            return summaries_over_seeds(self.catalog, judged, self.results)
        return [
            summarize_fault(self.catalog.fault(f), [r for r in self.results if r.fault == f])
            for f in self.fault_ids
            if f not in self.unrun and f not in self.unplaced
        ]

    def record(self, report: SweepReport) -> str | None:
        """What changed since earlier sweeps goes into the report; a sweep
        that judged faults joins the history. Returns why it did not, if so."""
        history = History(self.history_path)
        try:
            summaries = self.summaries()
            name = self.catalog.target.name  # kept per target: a moved catalog keeps its past
            changes = history.changes(name, summaries, self.sites, covered_by_catalog(self.catalog))
            report.changes = vars(changes)
            if not self.runnable:
                return "history not recorded: no fault ran here"
            if not self.harness_ok:
                return "history not recorded: the harness is broken, no fault was judged"
            history.record(
                catalog=name,
                digest=self.user_digest,
                machine=self.machine,
                summaries=summaries,
                sites=self.sites,
            )
            return None
        finally:
            history.close()

    # ----------------------------------------------------------------- write
    def needed_runs(self) -> list[str]:
        """Every (fault, config) run of the sweep, as `<fault>:<config>`."""
        names = [c.name for c in self.configs]
        return [f"{f}:{c.name}" for f in self.fault_ids for c in self.catalog.configs_for(f, names)]

    def report(self) -> SweepReport:
        return SweepReport(
            catalog=str(self.catalog.path),
            catalog_sha256=catalog_sha256(self.catalog.path),
            target=self.catalog.target.name,
            machine=self.machine,
            native_source_sha256=self.user_digest,
            rank_mode=str(self.catalog.rank_mode),
            controls=self.controls,
            results=self.results,
            faults=self.summaries(),
            harness_ok=self.harness_ok,
            runnable=self.runnable,
            gpus_needed={c.name: self.catalog.gpus_for(c) for c in self.configs},
            logical_ranks=bool(self.catalog.target.logical_run),  # one GPU runs them all
            wall_s=round(self.wall_s, 2),
            slots=self.options.slots,
            sites=self.sites,
            only=list(self.options.only or []),
            budget_s=self.options.budget_s,
            unrun=self.unrun,
            schedules=self.schedules(),
            built=self.built,
            matrix=self.matrix,
            firing={site: str(fired) for site, fired in self.firing.items()},
            unplaced=self.unplaced,
            configs_not_run={
                c.name: f"needs {self.catalog.gpus_for(c)} GPUs" for c in self.too_big
            },
            gpu_runs_needed=[] if self.runnable else self.needed_runs(),
        )

    def schedules(self) -> dict | None:
        """With --seeds: each seed's schedule and verdict, and the kill rate per
        fault and per schedule family (None without seeds)."""
        if not self.options.seeds:
            return None
        return report_schedules(self.catalog, self.fault_ids, self.results, self.options.seeds)

    def write(self, report: SweepReport) -> Path:
        return write_report(self.results_dir, report)

    def ok(self, report: SweepReport) -> bool:
        return report.ok  # the built trees' when nothing could run

    def why_not_ok(self, report: SweepReport) -> str | None:
        """Why the sweep is not ok (what its exit status 1 means), in one
        line; None when it is ok."""
        if self.ok(report):
            return None
        if not self.runnable:
            failed = [f"{b['fault']} ({b['state']})" for b in self.built if not b["ok"]]
            return f"{len(failed)} of {len(self.built)} trees not ok: {', '.join(failed)}"
        if not self.harness_ok:
            return "the harness is broken: a control is wrong, no fault was judged"
        missed = [f"{s.fault} (expect {s.expect}: {s.verdict})" for s in report.faults if not s.ok]
        said = []
        if missed:
            said.append(f"{n_faults(len(missed))} missed the expectation: {', '.join(missed)}")
        if self.unrun:
            said.append(f"{n_faults(len(self.unrun))} not run (the budget was spent)")
        if self.unplaced:
            said.append(
                f"{n_faults(len(self.unplaced))} whose sites fire together under no config "
                f"of the matrix: {', '.join(self.unplaced)}"
            )
        return "; ".join(said)


def n_faults(count: int) -> str:
    return f"{count} fault" + ("" if count == 1 else "s")


def built_row(fault_id: str, prepared) -> dict:
    """A tree built without the GPUs: `built`, an error's word, or ERASED
    (ok for a must-fail mutant, not for a must-pass fault: faults/pipeline/erasure.py)."""
    judged = prepared.error or prepared.erased
    return {
        "fault": fault_id,
        "state": judged.verdict.value if judged else "built",
        "ok": judged.ok if judged else True,
        "tree_digest": prepared.digest,
        "apply_s": round(prepared.apply_s, 3),
        "build_s": round(prepared.build_s, 3),
        "sass_s": round(prepared.sass_s, 3),
        "reason": "; ".join(filter(None, [judged and judged.reason, prepared.erased_unknown])),
    }
