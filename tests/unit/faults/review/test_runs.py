"""The run half of the review (faults/review/runs.py, matrix.py, progress.py)
with a stand-in engine: which configs run and which not and why, where each
site fires from its probe's markers, the faults placed where their sites
fire, what the progress is told, and whose fault a wrong control is."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from faults.judge.run_result import RunResult
import faults.review.runs as runs
from faults.catalog import Config, Patch, load_catalog
from faults.catalog.model import Exposure
from faults.judge.outcome import Outcome
from faults.judge.verdict import Verdict
from faults.pipeline.engine import CLEAN, FORCED
from faults.review.coverage import coverage
from faults.review.matrix import (
    Firing,
    config_plan,
    fault_configs,
    firing,
    probed_sites,
    probes,
)
from faults.review.progress import Planned, Ran
from faults.review.runs import CleanFailure
from hostio import RankMode
from invariants.sync.sites import parse_tree

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload"
WAIT = "fx.consumer.flag_wait"
STORE = "fx.producer.payload_store"
FAULTS = ["D1", f"gen.delay.{STORE}", "S1", "S2", f"gen.skip.{WAIT}"]


def fixture_catalog(*configs: Config, exposure: bool = False):
    """The CPU fixture's catalog with its generated faults and `configs`
    (with a real-size config `<config>@big` of each when `exposure`)."""
    from faults.generate.site_faults import with_generated

    catalog = with_generated(load_catalog(FIXTURE / "catalog.toml"), REPO)
    catalog = replace(catalog, configs=configs)
    if exposure:
        catalog = replace(catalog, exposure=Exposure("big", ("--big",))).with_exposure()
    return catalog


def touched_wait(catalog):
    """The fixture's flag wait as a touched site, with its covering faults."""
    sites, _ = parse_tree(FIXTURE)
    return [coverage(catalog, sites)[WAIT]]


def result(fault: str, config: str, verdict: Verdict, ok: bool, markers=None) -> RunResult:
    """A judged run; one that printed `markers` (None: it never ran) exited 0 if ok, else 1."""
    outcome = None
    if markers is not None:
        outcome = Outcome(0 if ok else 1, False, 0.0, 0, 0, 0, markers=markers).to_dict()
    return RunResult(fault, config, 0, verdict, ok, f"{verdict.value} here", "0" * 64, {}, outcome)


def test_the_plan_is_every_config_at_its_own_size_that_fits_here():
    catalog = load_catalog(REPO / "catalogs/afdep.toml").with_exposure()
    small = ["bf16-eager", "bf16-graph", "fp8-eager", "bf16-eager-payload-first"]
    small += ["bf16-eager-arm-attention", "bf16-graph-ungate"]
    four = ["4gpu-f1", "4gpu-f2", "4gpu-f3"]
    plan = config_plan(catalog, 2)  # a GPU per rank: the 4-rank splits need 4
    assert [c.name for c in plan.run] == small
    assert plan.not_run == {name: "needs 4 GPUs, 2 here" for name in four}
    # one GPU, logical ranks: every split runs, 2A:2F and 1A:3F included
    plan = config_plan(catalog.in_rank_mode(RankMode.LOGICAL), 1)
    assert ([c.name for c in plan.run], plan.not_run) == (small + four, {})
    plan = config_plan(catalog, 0)
    assert plan.run == []
    assert plan.not_run == {
        **{name: "needs 2 GPUs, 0 here" for name in small},
        **{name: "needs 4 GPUs, 0 here" for name in four},
    }


def test_a_probe_is_a_zero_delay_printing_the_generated_markers():
    catalog = load_catalog(REPO / "catalogs/afdep.toml")
    marker = "threadIdx.x % 32 == 0 && blockIdx.x == 0"  # [generate] marker
    assert probes(catalog, ["cb.attention_combine.row_wait"]) == (
        Patch(
            "probe.cb.attention_combine.row_wait",
            site="cb.attention_combine.row_wait",
            action="delay",
            ns=0,
            when=marker,
        ),
    )


def test_the_probed_sites_are_the_touched_then_those_its_faults_patch():
    catalog = fixture_catalog(Config("a"))
    assert probed_sites(catalog, touched_wait(catalog)) == [WAIT, STORE]


def test_where_a_site_fires_is_read_from_the_clean_runs_markers():
    controls = [
        result(CLEAN, "a", Verdict.PASSED, True, {"probe.s1": 4, "probe.s2": 1}),
        result(CLEAN, "b", Verdict.PASSED, True, {"probe.s2": 2, "S1": 9}),
        result(CLEAN, "c", Verdict.BROKE, False, {}),  # failed before: not known
        result(CLEAN, "d", Verdict.BUILD_ERROR, False),  # never ran: says nothing
        result(FORCED, "a", Verdict.KILLED, True, {}),  # not the clean tree
    ]
    fired = firing(["s1", "s2", "s3"], controls)
    assert fired == {
        "s1": Firing("s1", ["a"], ["b"], ["c"]),
        "s2": Firing("s2", ["a", "b"], [], ["c"]),
        "s3": Firing("s3", [], ["a", "b"], ["c"]),
    }
    assert [f.uncovered for f in fired.values()] == [False, False, False]
    assert str(fired["s1"]) == (
        "fires under: a; never under: b; not known under: c (the clean run failed)"
    )
    [s3] = firing(["s3"], controls[:2]).values()
    assert (s3.uncovered, str(s3)) == (True, "fires under: none; never under: a, b")


def test_each_covering_fault_runs_where_its_sites_all_fire():
    catalog = fixture_catalog(Config("a"), Config("b"), Config("c"))
    fired = {WAIT: Firing(WAIT, ["a", "b"], ["c"]), STORE: Firing(STORE, ["a", "c"], ["b"])}
    chosen = fault_configs(catalog, touched_wait(catalog), fired, list(catalog.configs))
    a, b = catalog.configs[:2]
    assert chosen == {
        "D1": [a],  # delays the store: where the wait and the store fire
        f"gen.delay.{STORE}": [a],
        "S1": [a],
        "S2": [a, b],  # skips the wait alone
        f"gen.skip.{WAIT}": [a],
    }
    fired[STORE] = Firing(STORE, ["c"], ["a", "b"])  # never where the wait fires
    chosen = fault_configs(catalog, touched_wait(catalog), fired, list(catalog.configs))
    assert chosen == {"D1": [], f"gen.delay.{STORE}": [], "S1": [], "S2": [a, b],
                      f"gen.skip.{WAIT}": []}  # fmt: skip


class StandIn:
    """The engine, standing in: each clean run prints the markers `printed`
    names for its config; a forced failure is killed; a fault passes or is
    killed as expected. Every engine made and every call is kept."""

    made: list[StandIn] = []
    printed: dict[str, dict[str, int]] = {}
    clean: dict[str, Verdict] = {}  # config -> a clean run's verdict other than PASSED
    forced: dict[str, Verdict] = {}  # config -> a forced failure's verdict other than KILLED
    # (fault, config) -> a covering fault's verdict other than the expected one
    verdicts: dict[tuple[str, str], Verdict] = {}

    def __init__(self, catalog, root, workdir, *, ref=None, probes=(), runs_at_once=None):
        self.catalog, self.ref, self.probes = catalog, ref, probes
        self.runs_at_once = runs_at_once
        self.calls: list[tuple] = []
        StandIn.made.append(self)

    def prepare(self, label, fault_id=None, patches=None):
        return None

    def close(self):
        self.closed = True

    def controls(self, configs, slots=1, on_result=None, then=None):
        """As Engine.controls runs them in one slot: from one queue, each
        clean run of `configs` that passes followed by its forced failure and
        `then`'s configs, clean."""
        self.calls.append(("controls", [c.name for c in configs], slots))
        queue, found = [(CLEAN, c) for c in configs], []
        while queue:
            label, config = queue.pop(0)
            if label == CLEAN:
                passed = Verdict.PASSED
                verdict = passed if self.ref else StandIn.clean.get(config.name, passed)
                markers = StandIn.printed.get(config.name, {})
                run = result(CLEAN, config.name, verdict, verdict is passed, markers)
            else:
                verdict = StandIn.forced.get(config.name, Verdict.KILLED)
                run = result(FORCED, config.name, verdict, verdict is Verdict.KILLED, {})
            found.append(run)
            on_result(run)
            if label == CLEAN and run.ok and config in configs:
                if self.catalog.control:
                    queue.append((FORCED, config))
                queue += [(CLEAN, more) for more in (then(run) if then else [])]
        return [run for label in (CLEAN, FORCED) for run in found if run.fault == label]

    def evaluate(self, fault_id, configs):
        self.calls.append(("evaluate", fault_id, [c.name for c in configs]))
        expect = self.catalog.fault(fault_id).expect
        wanted = Verdict.PASSED if expect == "pass" else Verdict.KILLED
        found = []
        for c in configs:
            verdict = StandIn.verdicts.get((fault_id, c.name), wanted)
            found.append(result(fault_id, c.name, verdict, verdict is wanted, {fault_id: 1}))
        return found


@pytest.fixture
def stand_in(monkeypatch):
    StandIn.made, StandIn.printed, StandIn.clean, StandIn.forced = [], {}, {}, {}
    StandIn.verdicts = {}
    monkeypatch.setattr(runs, "Engine", StandIn)
    monkeypatch.setattr(runs, "gpu_count", lambda: 2)
    return StandIn


def review_runs(catalog, tmp_path, touched, slots=1):
    events: list = []
    report = runs.run_review(
        touched, catalog, tmp_path, tmp_path, "B", tmp_path / "w", slots, events.append
    )
    return report, events


def test_the_change_runs_everywhere_then_its_faults_where_the_site_fires(stand_in, tmp_path):
    catalog = fixture_catalog(Config("a"), Config("b"), Config("c", gpus=4), exposure=True)
    both = {f"probe.{WAIT}": 3, f"probe.{STORE}": 1}
    stand_in.printed = {"a": both, "b": {f"probe.{STORE}": 2}, "a@big": both}
    report, events = review_runs(catalog, tmp_path, touched_wait(catalog), slots=3)
    [change] = stand_in.made
    assert change.runs_at_once == 3  # its slots: each run gets that share of the CPU
    assert [p.owner for p in change.probes] == [f"probe.{WAIT}", f"probe.{STORE}"]
    assert change.calls[0] == ("controls", ["a", "b"], 3)  # a@big as a's clean run lands
    # The must-pass faults run under both configs; a must-fail fault's first
    # kill ends its runs.
    runs_of = {"D1": ("a", "a@big"), f"gen.delay.{STORE}": ("a", "a@big")}
    ran_faults = [(f, c) for f in FAULTS for c in runs_of.get(f, ("a",))]
    assert sorted(change.calls[1:]) == sorted(("evaluate", f, [c]) for f, c in ran_faults)
    clean_then_forced = [(CLEAN, "a"), (CLEAN, "b"), (CLEAN, "a@big"), (FORCED, "a"), (FORCED, "b")]
    assert [(r.fault, r.config) for r in report.controls] == clean_then_forced
    assert report.plan.not_run == {"c": "needs 4 GPUs, 2 here"}
    assert report.firing == {WAIT: Firing(WAIT, ["a", "a@big"], ["b"])}
    assert [(r.fault, r.config) for r in report.faults] == ran_faults
    assert (report.unplaced, report.unfired, report.ok) == ([], [], True)
    every = "the change's tree, clean then with the forced failure, under every config here"
    twins = "the change's clean tree under the real-size config of a config where it fires"
    planned = [e for e in events if isinstance(e, Planned)]
    assert planned == [
        Planned(f"{every}: a, b", 4, 4, 0),
        Planned(f"{twins}: a@big", 1, 5, 1),  # planned as a's clean run landed
        Planned(f"the covering faults, each where its sites fire: {', '.join(FAULTS)}", 10, 15, 5),
    ]
    ran = [e for e in events if isinstance(e, Ran)]
    # the plan grows as each stage is planned, and shrinks by a must-fail
    # fault's configs after its kill: what is left is of the runs planned so far
    assert [e.done for e in ran] == list(range(1, 13))
    assert ran[-1].left == 0
    assert ran[:5] == [
        Ran("change", CLEAN, "a", Verdict.PASSED, 1, 4),
        Ran("change", CLEAN, "b", Verdict.PASSED, 2, 5),
        Ran("change", FORCED, "a", Verdict.KILLED, 3, 5),
        Ran("change", CLEAN, "a@big", Verdict.PASSED, 4, 5),  # before b's forced failure
        Ran("change", FORCED, "b", Verdict.KILLED, 5, 5),
    ]


def test_a_must_fail_fault_is_killed_once_any_config_kills_it(stand_in, tmp_path):
    """The sweep's rule: a must-fail fault not killed under its first config
    runs on, and its first kill ends it, the miss before it no finding; one
    no config kills is wrong under each; a must-pass fault must pass under all."""
    catalog = fixture_catalog(Config("a"), Config("b"))
    both = {f"probe.{WAIT}": 3, f"probe.{STORE}": 1}
    stand_in.printed = {"a": both, "b": both}
    stand_in.verdicts = {("S1", "a"): Verdict.SURVIVED}
    report, _ = review_runs(catalog, tmp_path, touched_wait(catalog))
    assert [r.config for r in report.faults if r.fault == "S1"] == ["a", "b"]
    assert [r.config for r in report.faults if r.fault == "S2"] == ["a"]
    assert (report.wrong_faults, report.ok) == ([], True)
    assert [(r.fault, r.config) for r in report.killed_elsewhere] == [("S1", "a")]

    stand_in.verdicts = {("S1", "a"): Verdict.SURVIVED, ("S1", "b"): Verdict.SURVIVED}
    report, _ = review_runs(catalog, tmp_path, touched_wait(catalog))
    assert [(r.fault, r.config) for r in report.wrong_faults] == [("S1", "a"), ("S1", "b")]
    assert report.ok is False

    stand_in.verdicts = {("D1", "b"): Verdict.BROKE}
    report, _ = review_runs(catalog, tmp_path, touched_wait(catalog))
    assert [(r.fault, r.config) for r in report.wrong_faults] == [("D1", "b")]
    assert report.ok is False


def test_a_touched_site_that_never_fires_is_no_coverage(stand_in, tmp_path):
    catalog = fixture_catalog(Config("a"), Config("b"), exposure=True)
    stand_in.printed = {"a": {f"probe.{STORE}": 1}}
    report, _ = review_runs(catalog, tmp_path, touched_wait(catalog))
    [change] = stand_in.made
    assert change.calls == [("controls", ["a", "b"], 1)]  # no twin, no fault
    assert report.firing == {WAIT: Firing(WAIT, [], ["a", "b"])}
    assert report.unfired == [Firing(WAIT, [], ["a", "b"])]
    assert report.unplaced == FAULTS and report.faults == []
    assert not report.ok


def test_a_forced_failure_on_a_change_that_fails_alone_does_not_blame_the_harness(
    stand_in, tmp_path
):
    catalog = fixture_catalog(Config("a"), Config("b"))
    stand_in.clean = {"a": Verdict.BROKE}
    stand_in.forced = {"b": Verdict.SURVIVED}  # here the harness is blind
    report, events = review_runs(catalog, tmp_path, touched_wait(catalog), slots=4)
    change, base = stand_in.made
    assert (change.ref, base.ref, base.catalog.control) == (None, "B", ())
    assert base.calls == [("controls", ["a"], 4)]  # as many at a time as the change's
    assert report.change_fails == [CleanFailure("a", "exit 1 with no line naming a failure", "")]
    assert report.harness_broken == [
        "the harness is broken: the forced-fail control was not killed: SURVIVED: SURVIVED here "
        "(config b)"
    ]
    assert report.faults == []  # a control was wrong: no fault judged
    assert [e for e in events if isinstance(e, Ran)] == [
        Ran("change", CLEAN, "a", Verdict.BROKE, 1, 3),  # a's forced failure will not run
        Ran("change", CLEAN, "b", Verdict.PASSED, 2, 3),
        Ran("change", FORCED, "b", Verdict.SURVIVED, 3, 3),
        Ran("BASE", CLEAN, "a", Verdict.PASSED, 4, 4),
    ]


def test_no_config_running_here_is_no_coverage_not_an_approval(stand_in, tmp_path):
    """Every config needs more GPUs than are here: nothing runs, the touched
    site fires under no config (no coverage), and the runs are not ok."""
    catalog = fixture_catalog(Config("a", gpus=4), Config("b", gpus=4))
    report, events = review_runs(catalog, tmp_path, touched_wait(catalog))
    assert report.plan.not_run == {"a": "needs 4 GPUs, 2 here", "b": "needs 4 GPUs, 2 here"}
    assert (report.controls, report.faults, report.unplaced) == ([], [], FAULTS)
    assert report.firing == {WAIT: Firing(WAIT)}
    assert report.unfired == [Firing(WAIT)]
    assert str(Firing(WAIT)) == "fires under: none; no clean run here"
    assert (report.ran_nothing, report.unrun, report.ok) == (True, {}, False)


def test_a_touched_site_none_of_whose_must_pass_faults_ran_is_not_covered(stand_in, tmp_path):
    """The wait fires, the store its must-pass faults delay never does: they
    run nowhere, only a must-fail fault runs, and no run covers the wait's
    must-pass side."""
    catalog = fixture_catalog(Config("a"))
    stand_in.printed = {"a": {f"probe.{WAIT}": 1}}
    report, _ = review_runs(catalog, tmp_path, touched_wait(catalog))
    assert report.firing == {WAIT: Firing(WAIT, ["a"])}
    assert [(r.fault, r.config) for r in report.faults] == [("S2", "a")]
    assert report.unplaced == ["D1", f"gen.delay.{STORE}", "S1", f"gen.skip.{WAIT}"]
    assert report.unrun == {
        WAIT: [
            f"no must-pass fault ran: D1, gen.delay.{STORE} "
            "(their sites fire together under no config here)"
        ]
    }
    assert (report.unfired, report.ran_nothing, report.ok) == ([], False, False)


def test_a_few_must_pass_faults_under_many_configs_fill_every_slot(stand_in, tmp_path):
    """Two must-pass faults under four configs are eight runs, each a job of
    its own: with four slots, four run at once (a fault's configs in turn,
    as the sweep runs them, would hold it to two), and each fault's runs are
    reported in its configs' order."""
    import itertools
    import threading

    names = ["a", "b", "c", "d"]
    catalog = fixture_catalog(*(Config(name) for name in names))
    both = {f"probe.{WAIT}": 3, f"probe.{STORE}": 1}
    stand_in.printed = dict.fromkeys(names, both)
    # The first four runs meet here before any ends: were fewer at once, the
    # barrier would time out and the review raise.
    together = threading.Barrier(4, timeout=10)
    calls = itertools.count()
    plain = StandIn.evaluate

    def meeting_evaluate(self, fault_id, configs):
        if next(calls) < 4:
            together.wait()
        return plain(self, fault_id, configs)

    passing = ["D1", f"gen.delay.{STORE}"]
    failing = [f for f in FAULTS if f not in passing]
    jobs = runs.covering_jobs(catalog, {f: list(catalog.configs) for f in FAULTS})
    assert [(j.fault, [c.name for c in j.configs]) for j in jobs] == [
        *((f, [name]) for name in names for f in passing),
        *((f, names) for f in failing),
    ]
    stand_in.evaluate = meeting_evaluate
    try:
        report, _ = review_runs(catalog, tmp_path, touched_wait(catalog), slots=4)
    finally:
        stand_in.evaluate = plain
    assert [(r.fault, r.config) for r in report.faults if r.fault in passing] == [
        (f, name) for f in passing for name in names
    ]
    assert report.ok is True


def test_a_touched_site_no_config_runs_misses_no_fault():
    """[generate.not_run]: no fault is made from such a site, and the review
    holds none missing there (the contract is its only check); the others'
    gaps stay."""
    from faults.generate.site_faults import with_generated

    why = "no harness runs the producer"
    plain = load_catalog(FIXTURE / "catalog.toml")
    settings = replace(plain.generate, not_run=(("fx.producer.", why),))
    catalog = with_generated(replace(plain, generate=settings), REPO)
    sites, _ = parse_tree(FIXTURE)
    covers = coverage(catalog, sites)
    assert not any(".fx.producer." in f for f in catalog.faults if f.startswith("gen."))
    release = covers["fx.producer.flag_release"]
    generated = [f for f in release.faults if f.startswith("gen.")]
    assert (release.not_run, generated, release.missing) == (why, [], [])
    alone = coverage(replace(catalog, faults={}), sites)["fx.producer.flag_release"]
    assert (alone.faults, alone.missing) == ([], [])  # no fault at all, and none missing
    assert covers[WAIT].not_run is None and covers[WAIT].missing == []
    bare = coverage(replace(catalog, faults={}), sites)["fx.consumer.check"]
    assert bare.not_run is None and bare.missing  # no fault, and run: a gap
