"""UNOBSERVABLE and the mutation score per family: the verdict with an
injected static contract (a fake: invariants/sync/contract.py is not needed), a
fault over its repeats, the engine and a sweep of mutants on the CPU fixture,
and the report's family table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.catalog import Fault, Patch, load_catalog
from faults.judge.run_result import RunResult
from faults.operators import OPERATORS, Family
from faults.generate.site_faults import with_generated
from faults.judge.outcome import Outcome
from faults.judge.scores import family_scores
from faults.judge.verdict import NO_CONTRACT, FaultSummary, Verdict, judge, summarize_fault
from faults.pipeline.engine import Engine
from faults.sweep.sweep import Sweep, SweepOptions
from invariants.sync.sites import SourceTree

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"
DIGEST = "d" * 64
FLAGS = "k.cuh:7: x.flag_release: no st.release.sys and no fence before the flag store"
TEXT = Patch("M", file="k.cuh", old="a", new="b", marker_site="x.flag_release")
CLEAN = "the run passed clean with a must-fail fault"


def mutant(family: Family | None = Family.WEAKEN_RELEASE, survivor_ok: str | None = None):
    return Fault("M", "t", "fail", (TEXT,), survivor_ok=survivor_ok, family=family)


def outcome(**changes) -> Outcome:
    base = dict(exit_code=0, outer_timeout=False, wall_s=1.0, mismatches=0, timeout_lines=0)
    base.update(assertion_lines=0, markers={"M": 2}, digests=[DIGEST])
    return Outcome(**{**base, **changes})


def verdict(fault: Fault, contract, **changes):
    return judge(fault, outcome(**changes), DIGEST, patches=[TEXT], guards={}, contract=contract)


def never():
    raise AssertionError("the contract is asked of a survivor only")


def test_a_survivor_the_contract_flags_is_unobservable_with_the_violation():
    judgement = verdict(mutant(), lambda: FLAGS)
    assert (judgement.verdict, judgement.ok) == (Verdict.UNOBSERVABLE, True)
    assert judgement.reason == (
        f"{CLEAN}, but the static contract flags its tree: {FLAGS}; "
        f"hint: {OPERATORS[Family.WEAKEN_RELEASE].hint}"
    )


@pytest.mark.parametrize(
    "family", [None, Family.SKIP_WAIT, Family.EPOCH_OFF_BY_ONE, Family.WRONG_SLOT]
)
def test_only_a_mutant_that_weakens_order_can_be_unobservable(family):
    # A hand-written fault (N2 skips a wait under a delay) or a wrong value
    # was meant to show in a run: surviving is a finding, flagged or not.
    judgement = verdict(mutant(family), never)
    assert (judgement.verdict, judgement.ok) == (Verdict.SURVIVED, False)


def test_a_survivor_the_contract_passes_is_equivalent():
    # Removing a fence before a store that is itself a release weakens nothing
    # the contract requires (the afdep sweeps' remove-fence survivors).
    judgement = verdict(mutant(Family.REMOVE_FENCE), lambda: None)
    assert (judgement.verdict, judgement.ok) == (Verdict.EQUIVALENT, True)
    assert judgement.reason == (
        f"{CLEAN}, and the static contract still holds on its tree: the order it weakens "
        "is kept another way (a fence or a release of the scope, a barrier)"
    )


def test_with_no_contract_a_survivor_stays_survived_with_its_familys_hint():
    judgement = verdict(mutant(Family.REMOVE_BARRIER), None)
    assert (judgement.verdict, judgement.ok) == (Verdict.SURVIVED, False)
    assert judgement.reason == f"{CLEAN}; hint: {OPERATORS[Family.REMOVE_BARRIER].hint}; {NO_CONTRACT}"


def test_without_a_family_the_text_patch_hint_is_said():
    judgement = verdict(mutant(None), None)
    assert judgement.reason == (
        f"{CLEAN}; hint: the text patch in k.cuh ran and changed nothing visible: hold back "
        "the data its site orders (delay the producers' stores, not the publisher) so the "
        "window opens"
    )


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"exit_code": 1, "mismatches": 3}, Verdict.KILLED),
        ({"exit_code": None, "outer_timeout": True}, Verdict.HUNG),
        ({"markers": {}}, Verdict.NOT_FIRED),
        ({"exit_code": 139}, Verdict.BROKE),
    ],
)
def test_the_contract_is_asked_of_no_other_run(changes, expected):
    assert verdict(mutant(), never, **changes).verdict is expected


def test_a_known_survivor_stays_survived_and_asks_no_contract():
    judgement = verdict(mutant(survivor_ok="another wait covers it"), never)
    assert (judgement.verdict, judgement.ok) == (Verdict.SURVIVED, True)
    assert judgement.reason.endswith("; known survivor: another wait covers it")


def run(verdict: str) -> RunResult:
    return RunResult("M", "c", 0, verdict, verdict in ("KILLED", "UNOBSERVABLE"), verdict, "d")


@pytest.mark.parametrize(
    "verdicts, expected, ok",
    [
        (["UNOBSERVABLE", "UNOBSERVABLE"], "UNOBSERVABLE", True),
        (["UNOBSERVABLE", "NOT FIRED"], "UNOBSERVABLE", True),
        (["HUNG", "UNOBSERVABLE"], "HUNG", False),
        (["KILLED", "UNOBSERVABLE"], "FLAKY", False),
        (["SURVIVED", "SURVIVED"], "SURVIVED", False),
    ],
)
def test_over_repeats_a_never_killed_flagged_mutant_is_unobservable(verdicts, expected, ok):
    summary = summarize_fault(mutant(), [run(v) for v in verdicts])
    assert (summary.verdict, summary.ok, summary.family) == (expected, ok, "weaken-release")


def summary(fault: str, verdict: str, family: str | None, expect: str = "fail") -> FaultSummary:
    killed = int(verdict == "KILLED")
    return FaultSummary(fault, expect, verdict, True, 1, 1, killed, float(killed), 1, "", family)


def test_the_score_of_each_family_counts_every_judged_must_fail_fault():
    summaries = [
        summary("gen.remove-barrier.a", "KILLED", "remove-barrier"),
        summary("gen.remove-barrier.b", "SURVIVED", "remove-barrier"),
        summary("gen.remove-barrier.c", "UNOBSERVABLE", "remove-barrier"),
        summary("gen.remove-barrier.d", "HUNG", "remove-barrier"),
        summary("gen.remove-barrier.e", "NOT FIRED", "remove-barrier"),
        summary("gen.remove-barrier.f", "BUILD ERROR", "remove-barrier"),
        summary("gen.delay.a", "PASSED", "delay", expect="pass"),  # not a mutant: no score
        summary("N2", "FLAKY", None),
        summary("gen.skip.w", "KILLED", "skip-wait"),
    ]
    zero = dict.fromkeys(("killed", "survived", "unobservable", "flaky", "hung", "broke"), 0)
    unjudged = {"equivalent": 0, "erased": 0, "not_fired": 0, "errors": 0}
    assert family_scores(summaries) == {
        "skip-wait": {"faults": 1, **zero, "killed": 1, **unjudged, "score": 1.0},
        "remove-barrier": {
            "faults": 6,
            **{**zero, "killed": 1, "survived": 1, "unobservable": 1, "hung": 1},
            "equivalent": 0,
            "erased": 0,
            "not_fired": 1,
            "errors": 1,
            "score": 0.25,
        },
        "catalog": {"faults": 1, **zero, "flaky": 1, **unjudged, "score": 0.0},
    }
    assert family_scores([summary("x", "NOT FIRED", "wrong-slot")])["wrong-slot"]["score"] is None


# ------------------------------------------------------------- on the fixture
MUTATIONS = """
[[target.mutation]]
family = "weaken-release"
kind = "release"
pattern = 'memory_order_release'
replacement = 'memory_order_relaxed'

[[target.mutation]]  # the check reads the previous round's values: every word mismatches
family = "epoch-off-by-one"
kind = "compute"
pattern = 'expected\\(round_idx, word_idx\\) &&'
replacement = 'expected(round_idx - 1, word_idx) &&'
"""
WEAK = "gen.weaken-release.fx.producer.flag_release"
OFF = "gen.epoch-off-by-one.fx.consumer.check"


@pytest.fixture
def catalog(tmp_path):
    path = tmp_path / "catalog.toml"
    path.write_text(FIXTURE.read_text() + MUTATIONS)
    return with_generated(load_catalog(path), REPO)


def test_the_engine_asks_the_contract_once_per_surviving_tree(catalog, tmp_path):
    asked = []

    def contract(tree: Path, sources: SourceTree) -> str:
        asked.append((tree, sources.root))
        return FLAGS

    engine = Engine(catalog, REPO, tmp_path / "work", contract=contract)
    weak = engine.evaluate(WEAK, list(catalog.configs), repeats=2)
    off = engine.evaluate(OFF, list(catalog.configs), repeats=1)
    assert [(r.verdict, r.ok) for r in weak] == [(Verdict.UNOBSERVABLE, True)] * 2
    assert weak[0].reason == (
        f"{CLEAN}, but the static contract flags its tree: {FLAGS}; "
        f"hint: {OPERATORS[Family.WEAKEN_RELEASE].hint}"
    )
    assert weak[0].outcome["markers"] == {WEAK: 4}
    assert [(r.verdict, r.ok) for r in off] == [(Verdict.KILLED, True)]
    tree = tmp_path / "work" / WEAK / "tree"
    assert asked == [(tree, tree / catalog.target.sources)]


def test_a_target_with_no_contract_has_no_equivalent_mutant(catalog, tmp_path):
    """The fixture declares no [target.contract]: its surviving weaken mutant
    is SURVIVED, and says why it is not EQUIVALENT."""
    [result] = Engine(catalog, REPO, tmp_path / "work").evaluate(WEAK, list(catalog.configs))
    assert (result.verdict, result.ok) == (Verdict.SURVIVED, False)
    assert result.reason == f"{CLEAN}; hint: {OPERATORS[Family.WEAKEN_RELEASE].hint}; {NO_CONTRACT}"


def test_a_contract_that_cannot_check_leaves_the_survivor_survived(catalog, tmp_path):
    def contract(tree: Path, sources: SourceTree) -> str:
        raise RuntimeError("no PTX for this target")

    engine = Engine(catalog, REPO, tmp_path / "work", contract=contract)
    [result] = engine.evaluate(WEAK, list(catalog.configs))
    assert (result.verdict, result.ok) == (Verdict.SURVIVED, False)
    assert result.reason == (
        f"{CLEAN}; hint: {OPERATORS[Family.WEAKEN_RELEASE].hint}; "
        "the static contract was not checked: RuntimeError: no PTX for this target"
    )


def test_a_sweep_of_mutants_reports_the_score_per_family(catalog, tmp_path):
    options = SweepOptions(
        only=[f"{WEAK}|{OFF}"], results_dir=tmp_path / "results", contract=lambda tree, sources: FLAGS
    )
    sweep = Sweep.plan(catalog, REPO, tmp_path / "work", options, gpus=0)
    sweep.run(lambda line: None, lambda: None)
    document = sweep.report().to_json()
    assert document["ok"] and document["mutation_score"] == 0.5
    zero = dict.fromkeys(("survived", "unobservable", "flaky", "hung", "broke"), 0)
    assert document["mutation_score_by_family"] == {
        "weaken-release": {
            "faults": 1,
            "killed": 0,
            **{**zero, "unobservable": 1},
            "equivalent": 0,
            "erased": 0,
            "not_fired": 0,
            "errors": 0,
            "score": 0.0,
        },
        "epoch-off-by-one": {
            "faults": 1,
            "killed": 1,
            **zero,
            "equivalent": 0,
            "erased": 0,
            "not_fired": 0,
            "errors": 0,
            "score": 1.0,
        },
    }
    stem = sweep.write(sweep.report())
    assert json.loads(stem.with_suffix(".json").read_text())["mutation_score_by_family"]
    text = stem.with_suffix(".md").read_text()
    table = text.split("## Mutation score per family\n\n")[1].split("\n\n")
    assert table[0] == "score = killed / (killed + survived + unobservable + flaky + hung + broke)"
    assert table[1].splitlines() == [
        "| family | score | killed | survived | unobservable | flaky | hung | broke | equivalent "
        "| erased | not fired | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        "| weaken-release | 0.0 | 0 | 0 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |",
        "| epoch-off-by-one | 1.0 | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |",
    ]
    survivors = text.split("## Must-fail faults that survived a run\n\n")[1].splitlines()
    assert survivors == [
        f"- {WEAK}: UNOBSERVABLE, explained: {CLEAN}, but the static contract flags its "
        f"tree: {FLAGS}; hint: {OPERATORS[Family.WEAKEN_RELEASE].hint}"
    ]
