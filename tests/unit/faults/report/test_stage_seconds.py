"""A sweep's stage seconds and the engine's own share of them
(docs/tools.md, "Performance targets")."""

from __future__ import annotations

from faults.judge.run_result import RunResult
from faults.report.document import engine_share, stage_seconds


def run(fault: str, config: str, **seconds: float) -> RunResult:
    return RunResult(fault, config, 0, "KILLED", True, "", "d" * 64, seconds=seconds)


def test_a_trees_stages_count_once_and_a_runs_every_time():
    tree = {"apply": 1.0, "build": 2.0, "sass": 4.0}
    results = [
        run("F1", "eager", **tree, run=10.0, judge=0.25),
        run("F1", "graph", **tree, run=20.0, judge=0.5),
        run("F2", "eager", apply=1.5, build=0.5, sass=3.0, run=30.0, judge=0.25),
    ]
    assert stage_seconds(results) == {
        "apply": 2.5,
        "build": 2.5,
        "sass": 7.0,
        "run": 60.0,
        "judge": 1.0,
    }


def test_the_engine_share_counts_the_erasure_check_as_the_engines_own():
    # apply 2.5 + sass 7 + judge 1 of 73 stage seconds: the target's build and run are the rest
    stages = {"apply": 2.5, "build": 2.5, "sass": 7.0, "run": 60.0, "judge": 1.0}
    assert engine_share(stages) == round(10.5 / 73.0, 4) == 0.1438
    assert engine_share({**stages, "sass": 0.0}) == round(3.5 / 66.0, 4)
    assert engine_share({stage: 0.0 for stage in stages}) == 0.0


def test_a_result_from_before_the_erasure_check_counts_no_sass_seconds():
    older = run("F1", "eager", apply=1.0, build=2.0, run=10.0, judge=0.5)
    assert stage_seconds([older])["sass"] == 0.0
