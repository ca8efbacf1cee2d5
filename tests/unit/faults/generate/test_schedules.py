"""Seeded schedules (docs/operators.md, "Seeded schedules and replay"): the
draw for a seed, the patch it gives (the same seed, the same tree), run ids,
the catalog's checks, the summaries over seeds and the kill-rate tables."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog
from faults.catalog.load import catalog_from_tables
from faults.judge.run_result import RunResult
from faults.schedules.ids import RunId, base_id, parse_run_id
from faults.schedules.over_seeds import kill_rates, summaries_over_seeds
from faults.schedules.seeds import describe, with_seed, with_seeds
from faults.schedules.table import Schedule, ScheduleFamily
from faults.schedules.draw import draw
from faults.judge.verdict import Verdict
from faults.pipeline.apply import apply_fault
from faults.pipeline.scratch import tree_digest
from faults.schedules.report import schedule_tables

REPO = Path(__file__).parents[4]
AFDEP = REPO / "catalogs/afdep.toml"
CSRC = REPO / "afdep/csrc"


def test_an_uneven_draw_is_the_seeds_lengths():
    drawn = draw(Schedule(ScheduleFamily.UNEVEN, seed=7, count=4), 1000)
    assert drawn.lengths == (331, 970, 154, 404)
    assert drawn.summary() == "uneven seed 7: ns by warp [331, 970, 154, 404]"


def test_a_pct_draw_is_the_seeds_change_points():
    schedule = Schedule(ScheduleFamily.PCT, seed=7, changes=3, ctas=24, warps=16, steps=2)
    drawn = draw(schedule, 200_000)
    assert drawn.points == ((4, 13, 0), (10, 5, 1), (12, 10, 0))
    assert drawn.summary() == (
        "pct seed 7: 200000 ns at cta 4 warp 13 step 0, cta 10 warp 5 step 1, cta 12 warp 10 step 0"
    )
    assert draw(schedule, 200_000) == drawn  # the same seed, the same draw
    other = draw(Schedule(ScheduleFamily.PCT, seed=8, changes=3, ctas=24, warps=16), 1)
    assert other.points != drawn.points


def test_pct_draws_distinct_points_and_no_more_than_there_are():
    drawn = draw(Schedule(ScheduleFamily.PCT, seed=1, changes=9, ctas=2, warps=2, steps=1), 5)
    assert drawn.points == ((0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0))


def applied(tmp_path: Path, name: str, label: str, catalog) -> tuple[str, str]:
    """The patched file's text and the tree digest of `label` applied to a copy."""
    tree = tmp_path / name
    shutil.copytree(CSRC, tree / "afdep/csrc")
    [changed] = [p for p in apply_fault(tree, catalog, label) if p.name == "ffn_combine.cuh"]
    return changed.read_text(), tree_digest(tree / "afdep/csrc")


def test_the_same_seed_gives_the_same_patch_and_tree_and_another_seed_another(tmp_path):
    catalog = load_catalog(AFDEP, tree_root=REPO)
    for seed in (3, 4):
        catalog = with_seed(catalog, "N5s.pct", seed)
    first = applied(tmp_path, "a", "N5s.pct~s3", catalog)
    again = applied(tmp_path, "b", "N5s.pct~s3", catalog)
    other = applied(tmp_path, "c", "N5s.pct~s4", catalog)
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]
    points = draw(catalog.all_patches("N5s.pct~s3")[0].schedule, 200_000).points
    assert f"(blockIdx.x) == {points[0][0]} && (threadIdx.x / 32) == {points[0][1]}" in first[0]
    assert "scheduled delay (pct seed 3) at start of cb.ffn_combine.row_store" in first[0]


def test_a_seeded_twin_owns_its_patches_and_says_its_schedule():
    catalog = with_seed(load_catalog(AFDEP, tree_root=REPO), "N2s.uneven", 2)
    patches = catalog.all_patches("N2s.uneven~s2")
    assert [(p.owner, p.action, p.schedule and p.schedule.seed) for p in patches] == [
        ("N2s.uneven~s2", "delay", 2),
        ("N2s.uneven~s2", "skip", None),
    ]
    seed, text = describe(catalog, "N2s.uneven~s2")
    lengths = draw(patches[0].schedule, 200_000).lengths
    assert seed == 2 and len(lengths) == 16
    assert (
        text == "cf.attention_dispatch.row_store uneven seed 2: ns by cta "
        f"[{', '.join(map(str, lengths))}]"
    )
    assert describe(catalog, "N2") == (None, "")
    assert describe(catalog, "control.clean") == (None, "")


def test_seeds_replace_only_the_scheduled_faults():
    catalog = load_catalog(AFDEP, tree_root=REPO)
    seeded, ids = with_seeds(catalog, ["N2", "P1s.pct"], (5, 6))
    assert ids == ["N2", "P1s.pct~s5", "P1s.pct~s6"]
    assert with_seeds(catalog, ["N2"], ()) == (catalog, ["N2"])
    with pytest.raises(CatalogError) as error:
        with_seeds(catalog, ["N2", "P1"], (0,))
    assert str(error.value) == "--seeds 1: no chosen fault has a scheduled delay"


def test_a_run_id_goes_both_ways():
    run = parse_run_id("N2s.pct~s3@bf16-graph@2048#1")
    assert run == RunId("N2s.pct", 3, "bf16-graph@2048", 1)
    assert str(run) == "N2s.pct~s3@bf16-graph@2048#1" and run.label == "N2s.pct~s3"
    plain = parse_run_id("gen.skip.cf.ffn_stream_expand.row_wait@bf16-graph#0")
    assert plain == RunId("gen.skip.cf.ffn_stream_expand.row_wait", None, "bf16-graph", 0)
    result = RunResult("N2s.pct~s3", "bf16-graph@2048", 1, "KILLED", True, "r", "d")
    assert result.run_id == str(run)
    assert base_id("N2s.pct~s3") == "N2s.pct" and base_id("N2s.pct") == "N2s.pct"
    with pytest.raises(ValueError) as error:
        parse_run_id("N2-bf16-eager")
    assert str(error.value) == (
        "run id 'N2-bf16-eager': not of the form <fault>[~s<seed>]@<config>#<repeat>"
    )


def tables(**changes) -> dict:
    """The afdep catalog's tables with a scheduled delay patch changed."""
    import tomllib

    data = tomllib.loads(AFDEP.read_text())
    fault = next(f for f in data["fault"] if f["id"] == "P1s.pct")
    fault["patches"][0]["schedule"] = {"family": "pct", **changes}
    return data


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"family": "lottery"}, "family: 'lottery' is not one of ['pct', 'uneven']"),
        ({"over": "warp"}, "over: a pct schedule takes none"),
        ({"seed": -1}, "seed: an int >= 0, got -1"),
        ({"changes": 0}, "changes: an int in 1..64, got 0"),
    ],
)
def test_a_bad_schedule_is_named(changes, message):
    with pytest.raises(CatalogError) as error:
        catalog_from_tables(AFDEP, tables(**changes))
    assert str(error.value) == f"{AFDEP}: fault P1s.pct patch #0 schedule: {message}"


def test_a_pct_schedule_needs_its_sites_step():
    data = tables()
    del data["target"]["schedule"]["step"]["cf.attention_dispatch.row_store"]
    with pytest.raises(CatalogError) as error:
        catalog_from_tables(AFDEP, data)
    assert str(error.value) == (
        f"{AFDEP}: fault P1s.pct patch #0 schedule: a pct schedule needs [target.schedule] "
        "step.'cf.attention_dispatch.row_store', the site's step"
    )
    del data["target"]["schedule"]
    with pytest.raises(CatalogError) as error:
        catalog_from_tables(AFDEP, data)
    assert str(error.value).endswith(
        "schedule: the target has no [target.schedule] table spelling warp, lane and cta"
    )


def result(label: str, verdict: str, config: str = "bf16-graph") -> RunResult:
    return RunResult(label, config, 0, verdict, verdict == "KILLED", verdict.lower(), "d")


def test_a_must_fail_fault_killed_by_some_seeds_is_flaky_with_its_kill_rate():
    catalog, ids = with_seeds(load_catalog(AFDEP, tree_root=REPO), ["N2s.pct"], (0, 1, 2, 3))
    verdicts = ["KILLED", "SURVIVED", "KILLED", "KILLED"]
    results = [result(label, v) for label, v in zip(ids, verdicts, strict=True)]
    [summary] = summaries_over_seeds(catalog, ids, results)
    assert (summary.fault, summary.verdict, summary.kill_rate) == ("N2s.pct", Verdict.FLAKY, 0.75)
    assert summary.reason == "killed in 3 of 4 runs"


SCHEDULES = {
    "seeds": [0, 1],
    "runs": [
        {
            "fault": "N2s.pct",
            "seed": 0,
            "family": "pct",
            "expect": "fail",
            "schedule": "cf.attention_dispatch.row_store pct seed 0: 9 ns at cta 1 warp 4 step 0",
            "verdict": "KILLED",
            "runs": ["N2s.pct~s0@bf16-graph#0"],
        },
        {
            "fault": "N2s.pct",
            "seed": 1,
            "family": "pct",
            "expect": "fail",
            "schedule": "cf.attention_dispatch.row_store pct seed 1: 9 ns at cta 0 warp 2 step 0",
            "verdict": "SURVIVED",
            "runs": ["N2s.pct~s1@bf16-graph#0"],
        },
        {
            "fault": "P5s.uneven",
            "seed": 0,
            "family": "uneven",
            "expect": "pass",
            "schedule": "cb.ffn_combine.row_store uneven seed 0: ns by warp [3, 1]",
            "verdict": "PASSED",
            "runs": ["P5s.uneven~s0@bf16-graph#0"],
        },
    ],
}


def test_the_kill_rate_per_schedule_family_in_markdown():
    document = {**SCHEDULES, **kill_rates(SCHEDULES["runs"])}
    assert "\n".join(schedule_tables(document)) == "\n".join(
        [
            "",
            "## Kill rate per schedule family (2 seeds from 0)",
            "",
            "kill rate = seeds whose every run killed / seeds of must-fail faults; "
            "met: seeds whose runs all killed (must-fail) or all passed (must-pass)",
            "",
            "| family | must-fail faults | seeds | killed | kill rate | must-pass seeds | passed |",
            "|---|---|---|---|---|---|---|",
            "| pct | 1 | 2 | 1 | 0.50 | 0 | 0 |",
            "| uneven | 0 | 0 | 0 | n/a | 1 | 1 |",
            "",
            "| fault | family | expect | seeds | met | rate | verdict per seed |",
            "|---|---|---|---|---|---|---|",
            "| N2s.pct | pct | fail | 2 | 1 | 0.50 | s0 KILLED, s1 SURVIVED |",
            "| P5s.uneven | uneven | pass | 1 | 1 | 1.00 | s0 PASSED |",
            "",
            "| run ids | verdict | schedule |",
            "|---|---|---|",
            "| `N2s.pct~s0@bf16-graph#0` | KILLED | "
            "cf.attention_dispatch.row_store pct seed 0: 9 ns at cta 1 warp 4 step 0 |",
            "| `N2s.pct~s1@bf16-graph#0` | SURVIVED | "
            "cf.attention_dispatch.row_store pct seed 1: 9 ns at cta 0 warp 2 step 0 |",
            "| `P5s.uneven~s0@bf16-graph#0` | PASSED | "
            "cb.ffn_combine.row_store uneven seed 0: ns by warp [3, 1] |",
        ]
    )
    assert schedule_tables(None) == []


def test_a_replay_that_differs_says_what_differs():
    from faults.sweep.replay import compare, replay_markdown

    run = parse_run_id("N2s.pct~s1@bf16-graph#0")
    recorded = {"schedule": "s", "tree_digest": "a" * 64, "verdict": "KILLED", "reason": "x|y"}
    replayed = {"schedule": "s", "tree_digest": "a" * 64, "verdict": "SURVIVED", "reason": None}
    comparison = compare(run, recorded, replayed, Path("r.json"))
    assert (comparison["same_tree"], comparison["reproduced"]) == (True, False)
    assert replay_markdown(comparison) == "\n".join(
        [
            "# Replay of N2s.pct~s1@bf16-graph#0",
            "",
            "from r.json",
            "",
            "| | recorded | replayed | same |",
            "|---|---|---|---|",
            "| schedule | s | s | yes |",
            "| tree digest | aaaaaaaaaaaa | aaaaaaaaaaaa | yes |",
            "| verdict | KILLED | SURVIVED | NO |",
            "| reason | x/y | - |  |",
            "",
            "NOT reproduced: another verdict",
            "",
        ]
    )
    applied_only = {**replayed, "verdict": None, "tree_digest": "b" * 64}
    comparison = compare(run, recorded, applied_only, Path("r.json"))
    assert comparison["same_verdict"] is None
    assert replay_markdown(comparison).endswith("NOT reproduced: another tree\n")
    comparison = compare(run, recorded, {**applied_only, "tree_digest": "a" * 64}, Path("r"))
    assert replay_markdown(comparison).endswith("reproduced: the same schedule, the same tree\n")
