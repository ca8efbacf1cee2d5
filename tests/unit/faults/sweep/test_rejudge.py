"""`afdep-faults rejudge` (faults/sweep/rejudge.py) on the CPU fixture: a sweep's
recorded runs judged again from their outcomes, verdicts that today's rules
give otherwise changed and said, seeded runs and their kill rates too; a tree
whose digest is not the one that ran, or a report with nothing judged,
refused in one line with every report left as it was."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.faults.schedules.test_replay import scheduled_catalog
from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload/catalog.toml"


def rejudged(catalog: Path, tmp_path: Path, report: Path) -> int:
    common = ["--catalog", str(catalog), "--root", str(REPO), "--no-generated"]
    return main([*common, "--workdir", str(tmp_path / "again"), "rejudge", str(report)])


def edit(report: Path, change) -> None:
    document = json.loads(report.read_text())
    change(document)
    report.write_text(json.dumps(document))


def test_a_verdict_judged_by_older_rules_is_judged_again(tmp_path, capsys, swept):
    report = swept(tmp_path, FIXTURE, "--only", "S1")

    def as_an_older_rule_said(document: dict) -> None:
        document["results"][0] |= {"verdict": "SURVIVED", "ok": False, "reason": "old"}
        document["faults"][0] |= {"verdict": "SURVIVED", "ok": False}
        document["ok"] = False

    edit(report, as_an_older_rule_said)
    capsys.readouterr()
    assert rejudged(FIXTURE, tmp_path, report) == 0
    assert capsys.readouterr().out == (
        f"{report}: 1 verdict(s) changed\n  S1@default#0: SURVIVED (not ok) -> KILLED (ok)\n"
    )
    document = json.loads(report.read_text())
    assert [(r["verdict"], r["ok"]) for r in document["results"]] == [("KILLED", True)]
    assert [(f["fault"], f["verdict"], f["ok"]) for f in document["faults"]] == [
        ("S1", "KILLED", True)
    ]
    assert (document["ok"], document["mutation_score"]) == (True, 1.0)
    assert [again["changes"] for again in document["rejudged"]] == [
        ["S1@default#0: SURVIVED (not ok) -> KILLED (ok)"]
    ]
    markdown = report.with_suffix(".md").read_text()
    assert ": 1 verdict(s) changed: S1@default#0: SURVIVED (not ok) -> KILLED (ok)" in markdown
    assert "| S1 | fail | KILLED | yes |" in markdown
    assert rejudged(FIXTURE, tmp_path, report) == 0  # today's rules agree with themselves
    assert capsys.readouterr().out.endswith(": 0 verdict(s) changed\n")
    passes = json.loads(report.read_text())["rejudged"]
    assert [len(again["changes"]) for again in passes] == [1, 0]  # the first pass still said


def test_seeded_runs_and_their_kill_rates_are_judged_again(tmp_path, capsys, swept):
    catalog = scheduled_catalog(tmp_path)
    report = swept(tmp_path, catalog, "--only", "SU", "--seeds", "2", "--seed-base", "5")

    def one_seed_said_survived(document: dict) -> None:
        document["results"][1] |= {"verdict": "SURVIVED", "ok": False}
        document["schedules"]["families"]["uneven"]["kill_rate"] = 0.5

    edit(report, one_seed_said_survived)
    capsys.readouterr()
    assert rejudged(catalog, tmp_path, report) == 0
    assert capsys.readouterr().out.endswith("  SU~s6@default#0: SURVIVED (not ok) -> KILLED (ok)\n")
    document = json.loads(report.read_text())
    assert [r["verdict"] for r in document["results"]] == ["KILLED", "KILLED"]
    assert document["schedules"]["families"]["uneven"]["kill_rate"] == 1.0
    assert [(f["fault"], f["verdict"]) for f in document["faults"]] == [("SU", "KILLED")]


def test_a_tree_that_is_not_the_one_that_ran_is_refused(tmp_path, capsys, swept):
    report = swept(tmp_path, FIXTURE, "--only", "S1")
    edit(report, lambda document: document["results"][0].update(tree_digest="0" * 64))
    before = report.read_text(), report.with_suffix(".md").read_text()
    capsys.readouterr()
    assert rejudged(FIXTURE, tmp_path, report) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"python -m faults: error: rejudge: {report}: S1: its tree is now ")
    assert err.endswith(
        ", the run's was 000000000000: the fault or the sources changed since, run it again\n"
    )
    assert (report.read_text(), report.with_suffix(".md").read_text()) == before


def test_a_report_with_nothing_judged_or_no_report_is_one_line(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"harness_ok": False, "results": [], "faults": []}))
    assert rejudged(FIXTURE, tmp_path, broken) == 2
    assert capsys.readouterr().err == (
        f"python -m faults: error: rejudge: {broken}: its harness was broken: "
        "no fault was judged, nothing to judge again\n"
    )
    missing = tmp_path / "none.json"
    assert rejudged(FIXTURE, tmp_path, missing) == 2
    assert capsys.readouterr().err == (
        f"python -m faults: error: rejudge: {missing}: no such file\n"
    )


def test_a_changed_tree_is_dropped_with_drop_changed_and_run_again_in_a_shard(tmp_path, capsys, swept):
    """A shard whose fault changed since it ran: --drop-changed keeps the
    others' verdicts and drops that fault, which a new shard runs; the two
    merge into the report one sweep of both gives."""
    report = swept(tmp_path, FIXTURE, "--only", "S1|S2")
    whole = json.loads(report.read_text())["faults"]
    edit(report, lambda document: document["results"][0].update(tree_digest="0" * 64))
    capsys.readouterr()
    common = ["--catalog", str(FIXTURE), "--root", str(REPO), "--no-generated"]
    again = [*common, "--workdir", str(tmp_path / "again"), "rejudge", "--drop-changed"]
    assert main([*again, str(report)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"{report}: 0 verdict(s) changed", out[1]]
    assert out[1].startswith("  dropped S1 (was KILLED): its tree is now ")
    assert out[1].endswith(
        ", the run's was 000000000000: the fault or the sources changed since, run it again"
    )
    document = json.loads(report.read_text())
    assert [f["fault"] for f in document["faults"]] == ["S2"]
    assert {r["fault"] for r in document["results"]} == {"S2"}
    [(fault, was)] = document["rejudged"][-1]["dropped"].items()
    assert (fault, was["verdict"], was["ok"]) == ("S1", "KILLED", True)
    assert out[1] == f"  dropped S1 (was KILLED): {was['why']}"
    markdown = report.with_suffix(".md").read_text()
    said = "  - dropped, their trees changed since they ran (to run again): S1 (was KILLED, ok)"
    assert said in markdown
    rerun = swept(tmp_path, FIXTURE, "--only", "S1", out="rerun")
    merged_dir = tmp_path / "merged"
    assert main([*common, "merge", str(report), str(rerun), "--results-dir", str(merged_dir)]) == 0
    [merged] = merged_dir.glob("sweep-*.json")
    faults = {f["fault"]: (f["verdict"], f["ok"]) for f in json.loads(merged.read_text())["faults"]}
    assert faults == {f["fault"]: (f["verdict"], f["ok"]) for f in whole}
