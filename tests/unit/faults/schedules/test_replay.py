"""`sweep --seeds` and `replay` (docs/operators.md, "Seeded schedules and
replay") on the CPU fixture: a scheduled delay of the producer whose seed
decides whether a skipped wait is killed, swept over seeds, then one killed
run replayed: the same schedule, the same tree, the same verdict; what a
replay that differs says; and the one-line errors of a bad run id or report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faults.schedules.draw import draw
from faults.schedules.ids import parse_run_id
from faults.schedules.replay import compare, replay_markdown
from faults.schedules.table import Schedule, ScheduleFamily
from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"
# The producer's thread is rank 0; the fixture has one of each.
SCHEDULED = """
[target.schedule]
warp = "rank_idx"
lane = "0"
cta = "0"

[[fault]]
id = "SU"
title = "skipped wait while the producer's stores wait the length the seed drew"
expect = "fail"

[[fault.patches]]
site = "fx.producer.payload_store"
action = "delay"
ns = 200_000_000
schedule = { family = "uneven", count = 1 }

[[fault.patches]]
site = "fx.consumer.flag_wait"
action = "skip"
"""


def scheduled_catalog(tmp_path: Path) -> Path:
    text = FIXTURE.read_text().replace("[[config]]", SCHEDULED + "\n[[config]]", 1)
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    return path


def test_seeds_5_and_6_hold_the_producer_past_the_consumers_50_ms():
    lengths = [draw(Schedule(ScheduleFamily.UNEVEN, seed, count=1), 200_000_000) for seed in (5, 6)]
    assert [d.lengths for d in lengths] == [(167208900,), (154033662,)]


def test_a_swept_seed_is_replayed_to_the_same_schedule_tree_and_verdict(tmp_path, capsys):
    catalog = scheduled_catalog(tmp_path)
    common = ["--catalog", str(catalog), "--root", str(REPO), "--no-generated"]
    sweep = [*common, "--workdir", str(tmp_path / "w1"), "sweep", "--only", "SU"]
    sweep += ["--seeds", "2", "--seed-base", "5", "--results-dir", str(tmp_path / "out")]
    assert main(sweep) == 0
    [report] = (tmp_path / "out").glob("sweep-*.json")
    document = json.loads(report.read_text())
    runs = [(r["fault"], r["seed"], r["verdict"]) for r in document["results"]]
    assert runs == [("SU~s5", 5, "KILLED"), ("SU~s6", 6, "KILLED")]
    assert document["schedules"]["families"]["uneven"]["kill_rate"] == 1.0
    assert "SU~s5@default#0 tree=" in capsys.readouterr().out
    out = tmp_path / "replay"
    replay = [*common, "--workdir", str(tmp_path / "w2"), "replay", "SU~s5@default#0"]
    assert main([*replay, "--from", str(report), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    schedule = "fx.producer.payload_store uneven seed 5: ns by warp [167208900]"
    digest = document["results"][0]["tree_digest"][:12]
    assert f"| schedule | {schedule} | {schedule} | yes |" in text
    assert f"| tree digest | {digest} | {digest} | yes |" in text
    assert "| verdict | KILLED | KILLED | yes |" in text
    assert text.endswith("reproduced: the same schedule, the same tree, the same verdict\n")
    assert json.loads(out.with_suffix(".json").read_text())["reproduced"] is True
    assert out.with_suffix(".md").read_text() == text


def replay_error(tmp_path: Path, capsys, run_id: str, source: Path) -> str:
    assert main(["--root", str(REPO), "replay", run_id, "--from", str(source)]) == 2
    return capsys.readouterr().err.strip()


def test_replay_names_a_bad_run_id_or_report(tmp_path, capsys):
    missing = tmp_path / "none.json"
    said = replay_error(tmp_path, capsys, "N2-bf16-graph", missing)
    assert said == (
        "python -m faults: error: replay: run id 'N2-bf16-graph': "
        "not of the form <fault>[~s<seed>]@<config>#<repeat>"
    )
    said = replay_error(tmp_path, capsys, "N2@bf16-graph#0", missing)
    assert said == f"python -m faults: error: replay: --from {missing}: no such file"
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    said = replay_error(tmp_path, capsys, "N2@bf16-graph#0", broken)
    assert said.startswith(f"python -m faults: error: replay: --from {broken}: not a JSON report (")
    other = tmp_path / "other.json"
    other.write_text('{"tool": "faults.review.review"}')
    said = replay_error(tmp_path, capsys, "N2@bf16-graph#0", other)
    assert (
        said
        == f"python -m faults: error: replay: --from {other}: not a sweep report (no results list)"
    )
    sweep = tmp_path / "sweep.json"
    sweep.write_text(
        json.dumps(
            {
                "results": [
                    {"fault": "N2", "config": "bf16-graph", "repeat": 0, "verdict": "KILLED"}
                    | {"ok": True, "reason": "", "tree_digest": "t"}
                ]
            }
        )
    )
    said = replay_error(tmp_path, capsys, "N2s.pct~s3@bf16-graph#0", sweep)
    assert (
        said == f"python -m faults: error: replay: run id N2s.pct~s3@bf16-graph#0 is not in {sweep}"
    )


@pytest.mark.parametrize(
    ("seeds", "message"), [("0", "at least 1, got 0"), ("x", "an integer, got 'x'")]
)
def test_sweep_refuses_a_bad_seed_count(capsys, seeds, message):
    with pytest.raises(SystemExit) as exit:
        main(["--root", str(REPO), "sweep", "--seeds", seeds])
    assert exit.value.code == 2
    assert capsys.readouterr().err.strip().endswith(f"argument --seeds: {message}")


def test_a_replay_that_differs_says_what_differs():
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
