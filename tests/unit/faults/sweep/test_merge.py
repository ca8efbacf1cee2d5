"""`afdep-faults merge` (faults/sweep/merge.py) on the CPU fixture: two shards of a
sweep made one report with the verdicts, scores and reports one sweep of both
gives; shards that are not one sweep's, a run in two shards, a seeded shard
or a merge that would overwrite a shard refused in one line, nothing
written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.faults.schedules.test_replay import scheduled_catalog
from tests.unit.faults.sweep.test_rejudge import FIXTURE, REPO, edit
from tools.faults_cli.main import main

COMMON = ["--catalog", str(FIXTURE), "--root", str(REPO), "--no-generated"]


@pytest.fixture
def shard(tmp_path, swept):
    """shard(name, only, catalog=FIXTURE, *words): a sweep's report under tmp_path/name."""

    def report(name: str, only: str, catalog: Path = FIXTURE, *words: str) -> Path:
        return swept(tmp_path, catalog, "--only", only, *words, out=name)

    return report


def merge(tmp_path: Path, *reports: Path, out: Path | None = None) -> int:
    out = out or tmp_path / "merged"
    return main([*COMMON, "merge", *map(str, reports), "--results-dir", str(out)])


def judged(document: dict) -> list[tuple]:
    return [(f["fault"], f["verdict"], f["ok"], f["runs"]) for f in document["faults"]]


def test_two_shards_make_the_report_one_sweep_of_both_makes(tmp_path, capsys, shard):
    first, second = shard("a", "S1"), shard("b", "S2")
    whole = json.loads(shard("whole", "S1|S2").read_text())
    capsys.readouterr()
    assert merge(tmp_path, first, second) == 0
    stem = tmp_path / "merged" / first.stem
    assert capsys.readouterr().out == (
        "2 shards merged: 2 faults judged, 0 not run, 2 in no shard, mutation score 0.5; "
        f"reports: {stem}.json .md .xml\n"
    )
    document = json.loads(stem.with_suffix(".json").read_text())
    assert judged(document) == judged(whole)
    for key in ("mutation_score", "mutation_score_by_family", "firing_rate", "ok"):
        assert document[key] == whole[key], key
    assert [r["fault"] for r in document["results"]] == ["S1", "S2"]
    assert [s["report"] for s in document["shards"]] == [str(first), str(second)]
    shards = [json.loads(path.read_text())["stage_seconds"] for path in (first, second)]
    assert document["stage_seconds"] == {  # each shard's work, its controls included
        stage: round(shards[0][stage] + shards[1][stage], 3) for stage in shards[0]
    }
    assert set(shards[0]) == {"apply", "build", "sass", "run", "judge"}
    markdown = stem.with_suffix(".md").read_text()
    assert f"- merged from 2 shards: `{first}` (" in markdown
    assert "| S1 | fail | KILLED | yes |" in markdown
    assert "| S2 | fail | SURVIVED | yes |" in markdown
    assert '<testsuite name="faults:' in stem.with_suffix(".xml").read_text()
    assert document["not_selected"] == ["D1", "N1"]
    assert "- **in no shard**: 2 faults of the catalog (D1, N1)" in markdown


def test_what_a_shard_left_and_no_shard_ran_is_said_not_run(tmp_path, capsys, shard):
    first = shard("a", "S1")
    edit(first, lambda document: document.update(unrun=["S2", "N1"], budget_s=60.0))
    second = shard("b", "S2")
    capsys.readouterr()
    assert merge(tmp_path, first, second) == 1  # N1 is owed
    document = json.loads((tmp_path / "merged" / first.name).read_text())
    assert (document["unrun"], document["ok"]) == (["N1"], False)
    assert document["not_selected"] == ["D1"]  # N1 was selected: a budget left it
    markdown = (tmp_path / "merged" / first.name).with_suffix(".md").read_text()
    assert "- **not run**, by any shard: 1 faults (N1)" in markdown


def refused(tmp_path, capsys, *reports: Path, out: Path | None = None) -> str:
    capsys.readouterr()
    assert merge(tmp_path, *reports, out=out) == 2
    assert not (tmp_path / "merged").exists() or not any((tmp_path / "merged").iterdir())
    return capsys.readouterr().err.removeprefix("python -m faults: error: merge: ")


def test_a_run_in_two_shards_is_refused_naming_both_unless_the_rerun_wins(tmp_path, capsys, shard):
    first, again = shard("a", "S1"), shard("b", "S1")
    assert refused(tmp_path, capsys, first, again) == (
        f"{again}: S1 under default (repeat 0) is in {first} too: its verdict would be "
        "ambiguous (--rerun-wins keeps the later shard's)\n"
    )
    edit(first, lambda document: document["results"][0].update(verdict="SURVIVED", ok=False))
    out = tmp_path / "merged"
    words = [*COMMON, "merge", str(again), str(first), "--rerun-wins", "--results-dir", str(out)]
    assert main(words) == 0  # the earlier shard's SURVIVED is replaced, given in either order
    document = json.loads((out / first.name).read_text())
    assert [(r["fault"], r["verdict"]) for r in document["results"]] == [("S1", "KILLED")]
    assert document["superseded"] == [
        {"run": "S1@default#0", "kept": str(again), "dropped": str(first)}
    ]
    markdown = (out / first.name).with_suffix(".md").read_text()
    assert (
        f"- 1 runs re-run in a later shard, the later kept: S1@default#0 (kept from `{again}`)"
        in markdown
    )


def test_shards_of_another_tree_or_catalog_are_refused(tmp_path, capsys, shard):
    first, second = shard("a", "S1"), shard("b", "S2")
    edit(second, lambda document: document.update(native_source_sha256="f" * 64))
    assert refused(tmp_path, capsys, first, second).startswith(
        f"{second}: its native_source_sha256 is 'fff"
    )
    ours = json.loads(first.read_text())["catalog_sha256"]
    edit(second, lambda d: d.update(native_source_sha256=json.loads(first.read_text())[
        "native_source_sha256"], catalog_sha256="0" * 64))  # fmt: skip
    edit(first, lambda document: document.update(catalog_sha256="0" * 64))
    assert refused(tmp_path, capsys, first, second) == (
        f"{first}: judged by a catalog of sha256 000000000000, not {FIXTURE} "
        f"({ours[:12]}): give that catalog, or rejudge it by this one\n"
    )
    # judged again by this catalog (afdep-faults rejudge), both shards may merge
    for report in (first, second):
        edit(report, lambda d: d.update(rejudged=[{"catalog_sha256": ours, "changes": []}]))
    capsys.readouterr()
    assert merge(tmp_path, first, second) == 0
    assert json.loads((tmp_path / "merged" / first.name).read_text())["catalog_sha256"] == ours


def test_a_seeded_shard_a_broken_harness_and_an_overwrite_are_refused(tmp_path, capsys, shard):
    catalog = scheduled_catalog(tmp_path)
    seeded = shard("s", "SU", catalog, "--seeds", "2", "--seed-base", "5")
    first = shard("a", "S1")
    edit(seeded, lambda d: d.update(catalog_sha256=json.loads(first.read_text())["catalog_sha256"]))
    assert refused(tmp_path, capsys, first, seeded).endswith(
        "a shard over seeds (sweep --seeds): merge takes none\n"
    )
    second = shard("b", "S2")
    edit(second, lambda document: document.update(harness_ok=False))
    assert refused(tmp_path, capsys, first, second) == (
        f"{second}: its harness was broken or it ran nothing: no fault judged\n"
    )
    assert refused(tmp_path, capsys, first, first) == "a shard is named twice\n"
    assert refused(tmp_path, capsys, first, out=first.parent) == (
        f"--results-dir {first.parent}: would overwrite {first}\n"
    )


def test_an_older_shard_merges_without_what_it_lacks_but_not_without_its_runs(tmp_path, capsys, shard):
    first, second = shard("a", "S1"), shard("b", "S2")
    for gone in ("logical_ranks", "sites", "built", "stage_seconds", "gpus_needed"):
        edit(first, lambda document, gone=gone: document.pop(gone))
    capsys.readouterr()
    assert merge(tmp_path, first, second, out=tmp_path / "older") == 0
    edit(second, lambda document: document.pop("written"))
    assert refused(tmp_path, capsys, first, second) == (
        f"{second}: not a sweep report merge can read (no written)\n"
    )


def test_a_fault_the_catalog_lacks_is_refused_naming_it(tmp_path, capsys, shard):
    first, second = shard("a", "S1"), shard("b", "S2")
    edit(second, lambda document: document["faults"][0].update(fault="S9"))
    assert refused(tmp_path, capsys, first, second) == f"{second}: fault S9 is not in {FIXTURE}\n"
