"""The shrink loop against fake runners (docs/operators.md, "Shrinking"):
its ladders, its relations, the budget, repeats, and, with Hypothesis, that
over any monotone kill region it ends on an input that kills and whose every
dimension's next rung down does not."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from faults.catalog import load_catalog
from faults.judge.run_result import RunResult
from faults.judge.verdict import Verdict
from faults.shrink.loop import ShrinkLoop, option_value, override_args, relations_hold, start_input
from faults.shrink.plan import shrink_catalog
from faults.shrink.table import Dimension, Relation, RelationOp, ShrinkSpec
from hostio import RankMode

REPO = Path(__file__).parents[4]
SPEC = ShrinkSpec(
    (
        Dimension("tokens", "--tokens", min=1),
        Dimension("hidden", "--hidden-size", values=(2048, 512, 128)),
        Dimension("masking", "--empty-prob", values=(0.1, 0.0)),
    ),
)
START = {"tokens": 512, "hidden": 2048, "masking": 0.1}


def result(verdict: Verdict) -> RunResult:
    return RunResult("F", "c", 0, verdict, verdict is Verdict.KILLED, str(verdict), "d")


def parsed(args: list[str]) -> dict[str, float]:
    return {args[i]: float(args[i + 1]) for i in range(0, len(args), 2)}


def oracle(kills):
    """A runner that kills when `kills(the probe's {option: value})`, and
    records every probe's args."""
    calls = []

    def run(args: list[str]) -> RunResult:
        calls.append(args)
        return result(Verdict.KILLED if kills(parsed(args)) else Verdict.SURVIVED)

    run.calls = calls
    return run


class Clock:
    """Each call moves on `step` seconds."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_option_value_is_the_last_word_of_the_last_occurrence():
    words = ["run", "--tokens", "8", "--steps", "2", "--tokens", "8", "128", "512", "--graph"]
    assert option_value(words, "--tokens") == "512"
    assert option_value(words, "--steps") == "2"
    assert option_value(words, "--seed") is None
    assert option_value(["--graph"], "--graph") is None


def test_ladders_halve_to_the_min_or_walk_down_the_values():
    halving = Dimension("tokens", "--tokens", min=4)
    assert [halving.smaller(v) for v in (512, 9, 5, 4)] == [256, 4, 4, None]
    assert Dimension("t", "--t", min=1).smaller(3) == 1
    listed = Dimension("hidden", "--hidden-size", values=(2048, 512, 128))
    assert [listed.smaller(v) for v in (2048, 512, 128)] == [512, 128, None]
    assert Dimension("m", "--empty-prob", values=(0.1, 0.0)).smaller(0.1) == 0.0


def test_the_start_input_is_what_the_run_command_gives():
    catalog = load_catalog(REPO / "catalogs/afdep.toml").in_rank_mode(RankMode.LOGICAL)
    catalog = shrink_catalog(catalog)
    for name, tokens, steps in (("bf16-graph", 512, 2), ("bf16-graph@2048", 2048, 4)):
        words = list(catalog.target.run + catalog.config(name).args)
        assert start_input(catalog.shrink, words) == {
            "tokens": tokens,
            "steps": steps,
            "top-k": 8,
            "experts": 128,
            "hidden": 2048,
            "capacity": 2048,
            "masking": 0.1,
        }


def test_relations_read_dimensions_integers_and_the_run_commands_options():
    spec = ShrinkSpec(
        SPEC.dimensions,
        (
            Relation("tokens", RelationOp.AT_MOST, "hidden", "tokens <= hidden"),
            Relation("tokens", RelationOp.MULTIPLE_OF, "--ffn-ranks", "t % --ffn-ranks == 0"),
            Relation("tokens", RelationOp.AT_MOST, "600", "tokens <= 600"),
        ),
    )
    assert relations_hold(spec, START, ["--ffn-ranks", "2"])
    assert not relations_hold(spec, {**START, "tokens": 3}, ["--ffn-ranks", "2"])
    assert relations_hold(spec, {**START, "tokens": 3}, [])  # no --ffn-ranks: unchecked
    assert not relations_hold(spec, {**START, "tokens": 640}, [])
    assert not relations_hold(spec, {**START, "hidden": 128, "tokens": 256}, [])


def test_the_loop_keeps_every_rung_that_still_kills():
    runner = oracle(lambda v: v["--tokens"] >= 100 and v["--hidden-size"] >= 512)
    shrunk = ShrinkLoop(SPEC, [], runner, budget_s=1e9).run(START)
    assert shrunk.minimal == {"tokens": 128, "hidden": 512, "masking": 0.0}
    assert [(p.values["tokens"], p.values["hidden"], p.killed) for p in shrunk.probes] == [
        (512, 2048, True),
        (256, 2048, True),
        (128, 2048, True),
        (64, 2048, False),
        (128, 512, True),
        (128, 128, False),
        (128, 512, True),  # masking 0.0
        (64, 512, False),  # the second round: each dimension again, nothing shrinks
        (128, 128, False),
    ]
    assert shrunk.probes[6].args == [
        "--tokens",
        "128",
        "--hidden-size",
        "512",
        "--empty-prob",
        "0.0",
    ]
    assert not shrunk.budget_spent


def test_a_start_that_does_not_kill_is_the_only_probe():
    shrunk = ShrinkLoop(SPEC, [], oracle(lambda v: False), budget_s=1e9).run(START)
    assert not shrunk.start_killed
    assert shrunk.minimal == START and len(shrunk.probes) == 1
    assert shrunk.probes[0].verdicts == ["SURVIVED"]


def test_rungs_that_break_a_relation_are_never_run():
    spec = ShrinkSpec(
        SPEC.dimensions, (Relation("tokens", RelationOp.AT_MOST, "7", "tokens <= 7"),)
    )
    runner = oracle(lambda v: True)
    shrunk = ShrinkLoop(spec, [], runner, budget_s=1e9).run({**START, "tokens": 40})
    assert [p.values["tokens"] for p in shrunk.probes][:3] == [40, 5, 2]
    assert shrunk.minimal == {"tokens": 1, "hidden": 128, "masking": 0.0}


def test_the_budget_stops_before_a_probe_that_would_end_past_it():
    clock = Clock(5.0)  # two reads a probe: each probe takes 5 s, the loop's reads 5 s more
    shrunk = ShrinkLoop(SPEC, [], oracle(lambda v: True), budget_s=40, clock=clock).run(START)
    assert shrunk.budget_spent
    assert [p.seconds for p in shrunk.probes] == [5.0, 5.0, 5.0]
    assert shrunk.minimal == {"tokens": 128, "hidden": 2048, "masking": 0.1}


def test_a_probe_is_kept_only_when_every_repeat_kills():
    calls = []

    def flaky(args: list[str]) -> RunResult:
        calls.append(args)
        killed = len(calls) <= 2 or len(calls) % 2 == 1
        return result(Verdict.KILLED if killed else Verdict.SURVIVED)

    spec = ShrinkSpec((SPEC.dimensions[0],))
    shrunk = ShrinkLoop(spec, [], flaky, budget_s=1e9, repeat=2).run({"tokens": 8})
    assert [p.verdicts for p in shrunk.probes] == [["KILLED", "KILLED"], ["KILLED", "SURVIVED"]]
    assert shrunk.minimal == {"tokens": 8}


def test_override_args_set_every_dimension_in_order():
    assert override_args(SPEC, START) == [
        "--tokens",
        "512",
        "--hidden-size",
        "2048",
        "--empty-prob",
        "0.1",
    ]


@given(
    thresholds=st.tuples(
        st.integers(1, 600), st.sampled_from([128, 512, 2048]), st.sampled_from([0.0, 0.1])
    ),
    start_tokens=st.integers(1, 600),
    relation=st.booleans(),
)
def test_over_a_monotone_kill_region_the_result_kills_and_is_minimal_per_dimension(
    thresholds, start_tokens, relation
):
    """Kill iff every dimension is at or above its threshold; with the start
    inside, the end is inside, and no dimension's next allowed rung down is."""
    tokens, hidden, masking = thresholds
    start = {"tokens": max(start_tokens, tokens), "hidden": 2048, "masking": 0.1}
    spec = ShrinkSpec(
        SPEC.dimensions,
        (Relation("tokens", RelationOp.AT_MOST, "hidden", "tokens <= hidden"),) * relation,
    )

    def kills(v: dict[str, float]) -> bool:
        return (
            v["--tokens"] >= tokens
            and v["--hidden-size"] >= hidden
            and v["--empty-prob"] >= masking
        )

    loop = ShrinkLoop(spec, [], oracle(kills), budget_s=1e9)
    shrunk = loop.run(start)
    assert shrunk.start_killed and not shrunk.budget_spent
    assert kills(parsed(override_args(spec, shrunk.minimal)))
    for dimension in spec.dimensions:
        below = loop.one_rung_down(shrunk.minimal, dimension.name)
        assert below is None or not kills(parsed(override_args(spec, below)))


def test_an_input_already_probed_is_not_run_again():
    """tokens fails to go down first; hidden then shrinks, so a second round
    tries tokens again at an input never run; masking's first try is reused."""
    runner = oracle(lambda v: v["--tokens"] >= 512 and v["--empty-prob"] >= 0.1)
    shrunk = ShrinkLoop(SPEC, [], runner, budget_s=1e9).run(START)
    assert shrunk.minimal == {"tokens": 512, "hidden": 128, "masking": 0.1}
    assert len(runner.calls) == len({tuple(args) for args in runner.calls}) == 6


def test_every_probe_is_told_as_it_lands_and_the_end_marks_the_result_finished():
    told = []
    spec = ShrinkSpec((SPEC.dimensions[0],))
    loop = ShrinkLoop(spec, [], oracle(lambda v: v["--tokens"] >= 4), budget_s=1e9)
    loop.on_probe = lambda shrunk: told.append((len(shrunk.probes), dict(shrunk.minimal)))
    shrunk = loop.run({"tokens": 8})
    assert told == [(1, {"tokens": 8}), (2, {"tokens": 8}), (2, {"tokens": 4}), (3, {"tokens": 4})]
    assert shrunk.finished and shrunk.minimal == {"tokens": 4}


def test_a_fault_killed_at_another_listed_value_starts_there():
    from faults.shrink.loop import start_alternatives

    words = ["--tokens", "8", "128", "512", "--hidden-size", "2048"]
    alternatives = start_alternatives(SPEC, words, START)
    assert alternatives == [{**START, "tokens": 128}, {**START, "tokens": 8}]
    runner = oracle(lambda v: v["--tokens"] == 128 or v["--tokens"] <= 64)
    shrunk = ShrinkLoop(SPEC, words, runner, budget_s=1e9).run(START, alternatives)
    assert shrunk.start_killed and shrunk.start == {**START, "tokens": 128}
    assert [parsed(args)["--tokens"] for args in runner.calls[:3]] == [512, 128, 64]
    assert shrunk.minimal["tokens"] == 1


def test_no_start_that_kills_is_said_with_every_probe():
    from faults.shrink.loop import start_alternatives
    from faults.shrink.report import not_killed

    words = ["--tokens", "8", "512"]
    shrunk = ShrinkLoop(SPEC, words, oracle(lambda v: False), budget_s=1e9).run(
        START, start_alternatives(SPEC, words, START)
    )
    assert not shrunk.start_killed
    assert not_killed("gen.a.b", "bf16-graph", shrunk) == (
        "shrink: gen.a.b is not KILLED at the start input nor at the 1 other starts its run "
        "command's lists give under bf16-graph (SURVIVED; SURVIVED): nothing to shrink"
    )
