"""How a sweep spreads its faults (faults/pipeline/slots.py): trees build in run order
while runs go, each run waits for its own tree only, and an interrupt starts
no queued build or fault."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import faults.pipeline.slots as slots_module
from faults.catalog import load_catalog

REPO = Path(__file__).parents[4]
CATALOG = REPO / "tests/fixtures/flag_payload/catalog.toml"


class InterruptedEngine:
    """An engine whose first build (`stage="prepare"`) or first run
    (`stage="evaluate"`) is interrupted; the others count themselves."""

    catalog = load_catalog(CATALOG)

    def __init__(self, stage: str):
        self.stage = stage
        self.started: list[str] = []

    def controls(self, configs, slots):
        return []

    def prepare(self, label, fault_id):
        return self._stage("prepare", label)

    def evaluate(self, fault_id, configs, repeats):
        return self._stage("evaluate", fault_id) or []

    def _stage(self, stage: str, label: str):
        if stage != self.stage:
            return None
        self.started.append(label)
        if len(self.started) == 1:
            raise KeyboardInterrupt
        time.sleep(0.5)  # the one its worker may have taken before the stop
        return None


def test_an_interrupted_build_phase_starts_no_queued_build(monkeypatch):
    """Ctrl-C (here: the first build raising it) cancels the builds still
    queued, each of which would copy, patch and build its tree first."""

    monkeypatch.setattr(slots_module, "BUILDS_AT_ONCE", 1)
    engine = InterruptedEngine("prepare")
    faults = list(engine.catalog.faults)
    with pytest.raises(KeyboardInterrupt):
        slots_module.sweep([engine], faults * 3, None, 1, lambda found: None)
    assert engine.started[0] == faults[0]  # trees build in run order, each once
    assert len(engine.started) <= 2  # not 4


def test_a_run_waits_for_its_own_tree_only(monkeypatch):
    """The first fault runs while later trees still build (pipelined), and
    each tree is built once however often its fault is named."""

    events: list[str] = []
    lock = threading.Lock()

    class SlowBuilds(InterruptedEngine):
        def prepare(self, label, fault_id):
            time.sleep(0.3 if label != "D1" else 0.0)
            with lock:
                events.append(f"built {label}")

        def evaluate(self, fault_id, configs, repeats):
            with lock:
                events.append(f"ran {fault_id}")
            return []

    monkeypatch.setattr(slots_module, "BUILDS_AT_ONCE", 1)
    faults = ["D1", "S1", "S2", "N1"]
    monkeypatch.setattr(slots_module, "needs_quiet_gpus", lambda catalog, f: False)
    slots_module.sweep([SlowBuilds("none")], faults + faults, None, 1, lambda found: None)
    assert sorted(e for e in events if e.startswith("built")) == sorted(
        f"built {f}" for f in faults
    )
    assert events.index("ran D1") < events.index("built N1")  # D1 ran before the last build


def test_an_interrupted_run_phase_stops_every_worker_at_its_next_fault():
    """Two workers of five faults each: the first run is interrupted, and the
    other worker ends its current fault and starts no other."""
    engine = InterruptedEngine("evaluate")
    with pytest.raises(KeyboardInterrupt):
        slots_module.sweep([engine], ["D1"] * 10, None, 1, lambda found: None, slots=2)
    assert len(engine.started) <= 3  # not 6: the interrupted worker's one and the other's five


def test_a_long_run_holds_back_no_other_fault(monkeypatch):
    """Two slots, four faults, the first still running until the other three
    have run: the free worker takes each next fault in turn (dealt in
    advance, the third would wait behind the first)."""
    others_done = threading.Event()
    ran: list[str] = []

    class OneLongRun(InterruptedEngine):
        def evaluate(self, fault_id, configs, repeats):
            if fault_id == "D1":
                assert others_done.wait(timeout=10), "the other faults waited behind D1"
            ran.append(fault_id)
            if len(ran) == 3:
                others_done.set()
            return []

    monkeypatch.setattr(slots_module, "needs_quiet_gpus", lambda catalog, f: False)
    faults = ["D1", "S1", "S2", "N1"]
    slots_module.sweep([OneLongRun("none")], faults, None, 1, lambda found: None, slots=2)
    assert ran == ["S1", "S2", "N1", "D1"]


def test_each_fault_s_jobs_go_to_one_gpu_group_the_faults_dealt_in_turn(monkeypatch):
    """Two groups, three slots each: the faults alternate between them, a
    fault's every job (the review's one per config) on the group that builds
    its tree; the faults under a delay go to the alone phase, one worker each."""
    catalog = InterruptedEngine.catalog
    monkeypatch.setattr(slots_module, "needs_quiet_gpus", lambda catalog, f: f == "S1")
    first, second = InterruptedEngine("none"), InterruptedEngine("none")
    jobs = [slots_module.Job(f, (c,)) for c in ("x", "y") for f in ("D1", "S2", "N1", "S1")]
    shared, alone = slots_module.phases([first, second], catalog, jobs, 3)
    assert [(lane.engine, lane.workers) for lane in shared] == [(first, 3), (second, 3)]
    assert [[(j.fault, j.configs) for j in lane.jobs] for lane in shared] == [
        [("D1", ("x",)), ("N1", ("x",)), ("D1", ("y",)), ("N1", ("y",))],
        [("S2", ("x",)), ("S2", ("y",))],
    ]
    assert [(lane.engine, lane.workers, len(lane.jobs)) for lane in alone] == [
        (first, 1, 2),
        (second, 1, 0),
    ]
