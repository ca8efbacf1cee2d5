"""How a sweep spreads its faults over GPU groups and run slots: the
controls first, then the faults that tolerate neighbours `slots` at a time
on each engine's group while their trees build, then, one at a time per
group, the faults whose kill needs the window a delay opens
(docs/tools.md, "The sweep")."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import as_completed, wait
from dataclasses import dataclass

from faults.catalog import Catalog, Config
from faults.judge.run_result import RunResult
from faults.pipeline.engine import Engine, stopping_pool

BUILDS_AT_ONCE = 8  # trees copied, patched, built and checked at once (CPU work)


@dataclass(frozen=True)
class Job:
    """Runs of one fault that one worker makes in turn: the sweep's job is a
    fault under all its configs; the review makes one job of each must-pass
    run, so that a few faults under many configs still fill every slot."""

    fault: str
    configs: tuple[Config, ...] = ()  # () for the sweep: the configs it runs the fault under


@dataclass
class Lane:
    """An engine's share of a phase: its `workers` threads each take the next
    job of `jobs` not yet taken, so a long run holds back no other's jobs."""

    engine: Engine
    workers: int
    jobs: list[Job]


Phase = list[Lane]


def sweep(
    engines: list[Engine],
    fault_ids: list[str],
    config_names: list[str] | None,
    repeats: int,
    on_results: Callable[[list[RunResult]], None],
    slots: int = 1,
    deadline: float | None = None,
    placing: Callable[[list[RunResult]], dict[str, list[Config]]] | None = None,
) -> tuple[list[RunResult], list[RunResult]]:
    """Controls first (on the first engine), under each config some selected
    fault runs under (every selected config when none runs): a config no fault
    of this sweep runs under carries none of its verdicts, and a shard of a
    few sites need not pay the controls of every config. If either control is
    wrong the harness is broken and no fault runs. Then the faults, `slots` at a time on each
    engine's GPU group: a correct protocol passes under any interleaving, and
    a skipped release can only time out, so a neighbour's time-slicing only
    stresses them. Last, one at a time per group, the must-fail faults whose
    kill needs the window a delay opens: a neighbour would blur that window.
    Trees build while the shared faults run, each run waiting for its own;
    the faults that run alone start once every build has ended. Past
    `deadline` (time.monotonic()) no fault or build starts; those running
    end. `placing`: each fault's configs read from the right controls (a
    matrix sweep's: where its sites fired), a fault it gives none not run;
    None: the catalog's configs for it. Returns (controls, results), results
    in fault order; `on_results` sees each batch as it lands."""
    if slots < 1:
        raise ValueError(f"slots: at least 1 run per GPU group, got {slots}")
    catalog = engines[0].catalog
    fault_ids = [f for f in fault_ids if catalog.configs_for(f, config_names)]  # else nothing runs
    controls = engines[0].controls(control_configs(catalog, fault_ids, config_names), slots)
    on_results(controls)
    if not all(r.ok for r in controls):
        return controls, []
    if placing is None:
        placed = {f: catalog.configs_for(f, config_names) for f in fault_ids}
    else:
        placed = placing(controls)
        fault_ids = [f for f in fault_ids if placed.get(f)]

    def evaluate(engine: Engine, job: Job) -> list[RunResult]:
        return engine.evaluate(job.fault, placed[job.fault], repeats)

    phased = phases(engines, catalog, [Job(f) for f in fault_ids], slots)
    results = run_faults(phased, evaluate, on_results, deadline)
    order = {fault_id: i for i, fault_id in enumerate(fault_ids)}
    return controls, sorted(results, key=lambda r: (order[r.fault], r.config, r.repeat))


def run_faults(
    phased: tuple[Phase, Phase],
    evaluate: Callable[[Engine, Job], list[RunResult]],
    on_results: Callable[[list[RunResult]], None],
    deadline: float | None,
) -> list[RunResult]:
    """The jobs of a sweep whose controls were right, each `evaluate`d on
    its engine: the shared phase, then the faults that run alone, their trees
    built meanwhile."""
    shared_phase, alone_phase = phased
    results: list[RunResult] = []
    lock = threading.Lock()
    stop = threading.Event()  # set when the sweep is interrupted or stops on an error

    def past_deadline() -> bool:
        return deadline is not None and time.monotonic() >= deadline

    with stopping_pool(BUILDS_AT_ONCE, stop) as builds:
        # Trees apply and build several at once (CPU work), in run order, while
        # the shared faults run: each run waits for its own tree only.
        trees = dict.fromkeys(
            (lane.engine, job.fault)
            for phase in (shared_phase, alone_phase)
            for lane in phase
            for job in lane.jobs
        )
        built = {tree: builds.submit(tree[0].prepare, tree[1], tree[1]) for tree in trees}

        def work(engine: Engine, jobs: queue.SimpleQueue[Job]) -> None:
            while not (stop.is_set() or past_deadline()):
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    return
                built[engine, job.fault].result()  # raises what the build raised
                found = evaluate(engine, job)
                with lock:
                    results.extend(found)
                    on_results(found)

        _run_phase(shared_phase, work, stop)
        if past_deadline():  # no fault starts any more: neither does a build
            for future in built.values():
                future.cancel()
        # The faults that run alone need quiet GPUs and CPUs: every build ends first.
        wait(list(built.values()))
        _run_phase(alone_phase, work, stop)
    return results


def phases(
    engines: list[Engine], catalog: Catalog, jobs: list[Job], slots: int
) -> tuple[Phase, Phase]:
    """The shared phase (`slots` workers on each engine) and the alone phase
    (one on each), each engine dealt every n-th of the phase's faults with
    all their jobs (a tree builds on the engine that runs it), its workers
    taking them in order."""
    quiet = {fault: needs_quiet_gpus(catalog, fault) for fault in {job.fault for job in jobs}}
    alone = [job for job in jobs if quiet[job.fault]]
    shared = [job for job in jobs if not quiet[job.fault]]
    dealt = []
    for phase_jobs, workers in ((shared, slots), (alone, 1)):
        faults = list(dict.fromkeys(job.fault for job in phase_jobs))
        # A fault's jobs stay on one engine: its tree is built once, there.
        home = {fault: engines[i % len(engines)] for i, fault in enumerate(faults)}
        dealt.append(
            [
                Lane(engine, workers, [job for job in phase_jobs if home[job.fault] is engine])
                for engine in engines
            ]
        )
    shared_phase, alone_phase = dealt
    return shared_phase, alone_phase


def control_configs(
    catalog: Catalog, fault_ids: list[str], config_names: list[str] | None
) -> list[Config]:
    """The configs a sweep of `fault_ids` checks its harness under, in the
    catalog's order: those the faults run under, or, when none runs, every
    config `config_names` selects."""
    selected = [c for c in catalog.configs if config_names is None or c.name in config_names]
    used = {c.name for f in fault_ids for c in catalog.configs_for(f, config_names)}
    return [c for c in selected if c.name in used] or selected


def _run_phase(phase: Phase, work, stop: threading.Event) -> None:
    """Each lane's workers on threads of their own, taking its jobs from one
    queue; the first worker to fail stops the others at their next job."""
    workers = []
    for lane in phase:
        jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        for job in lane.jobs:
            jobs.put(job)
        workers += [(lane.engine, jobs)] * min(lane.workers, len(lane.jobs))
    if not workers:
        return
    with stopping_pool(len(workers), stop) as pool:
        for done in as_completed([pool.submit(work, engine, jobs) for engine, jobs in workers]):
            done.result()


def needs_quiet_gpus(catalog: Catalog, fault_id: str) -> bool:
    """A must-fail fault with a delay (a skipped wait whose guarded store a
    delay holds back, an exposed mutant): its kill depends on the window the
    delay opens, so it runs alone."""
    return catalog.fault(fault_id).expect == "fail" and any(
        patch.action == "delay" for patch in catalog.all_patches(fault_id)
    )
