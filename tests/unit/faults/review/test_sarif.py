"""The review's SARIF 2.1.0 (faults/report/sarif.py): the shape the standard
requires (checked key by key: no schema download here) and each finding of a
review at its file:line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from faults.judge.run_result import RunResult
from faults.judge.verdict import Verdict
from faults.pipeline.engine import CLEAN, FORCED
from faults.report.sarif import SCHEMA, Level, Result, Rule, sarif_document
from faults.review.model import ReviewVerdict
from faults.review.progress import Planned, Ran
from invariants.sync.finding import Finding
from tests.unit.faults.review.test_review import (
    FIXTURE,
    SRC,
    edit,
    fixture_repo,
    git,
    main,
    reviewed,
)
from tests.unit.faults.review.test_static import RELEASE_LINE, install_contract

CHECK = Rule("check", "a check")
OTHER = Rule("other", "another check")


def assert_sarif_shape(document: dict) -> None:
    """What the SARIF 2.1.0 schema requires, and what code-review tools read."""
    assert document["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json" == SCHEMA
    assert document["version"] == "2.1.0"
    [run] = document["runs"]
    driver = run["tool"]["driver"]
    assert isinstance(driver["name"], str) and driver["name"]
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert len(set(rule_ids)) == len(rule_ids)
    for result in run["results"]:
        assert result["message"]["text"]
        assert result["level"] in ("error", "warning")
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        for location in result.get("locations", []):
            physical = location["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            assert not uri.startswith("/") and "://" not in uri and "\\" not in uri
            assert physical["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
            if "region" in physical:
                assert physical["region"]["startLine"] >= 1


def results(path: Path) -> list[tuple]:
    document = json.loads(path.read_text())
    assert_sarif_shape(document)
    found = []
    for result in document["runs"][0]["results"]:
        [location] = result.get("locations", [{"physicalLocation": {"artifactLocation": {}}}])
        physical = location["physicalLocation"]
        found.append(
            (
                result["ruleId"],
                result["level"],
                physical["artifactLocation"].get("uri"),
                physical.get("region", {}).get("startLine"),
                result["message"]["text"],
            )
        )
    return found


def test_a_document_holds_each_finding_at_its_line():
    findings = [
        Result(CHECK, Level.ERROR, Finding("src/a.cu", 12, "broken here")),
        Result(OTHER, Level.WARNING, Finding("catalog.toml", None, "the whole file")),
        Result(CHECK, Level.ERROR, Finding(None, None, "nowhere in particular")),
    ]
    document = sarif_document("faults review", [CHECK, OTHER], findings)
    assert_sarif_shape(document)
    run = document["runs"][0]
    assert run["tool"]["driver"] == {
        "name": "faults review",
        "rules": [
            {"id": "check", "shortDescription": {"text": "a check"}},
            {"id": "other", "shortDescription": {"text": "another check"}},
        ],
    }
    assert run["results"][0] == {
        "ruleId": "check",
        "ruleIndex": 0,
        "level": "error",
        "message": {"text": "broken here"},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": "src/a.cu", "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": 12},
                }
            }
        ],
    }
    assert "region" not in run["results"][1]["locations"][0]["physicalLocation"]
    assert "locations" not in run["results"][2]


@pytest.mark.parametrize(
    "uri, line, message",
    [
        ("/abs/a.cu", 1, "SARIF uri '/abs/a.cu': relative and '/'-separated"),
        ("src\\a.cu", 1, "SARIF uri 'src\\\\a.cu': relative and '/'-separated"),
        ("src/a.cu", 0, "SARIF line 0: lines start at 1"),
    ],
)
def test_a_finding_outside_the_repository_is_refused(uri, line, message):
    with pytest.raises(ValueError) as error:
        Result(CHECK, Level.ERROR, Finding(uri, line, "x"))
    assert str(error.value) == message


def test_a_finding_under_an_undeclared_rule_is_refused():
    with pytest.raises(ValueError) as error:
        sarif_document("t", [CHECK], [Result(OTHER, Level.ERROR, Finding(None, None, "x"))])
    assert str(error.value) == "SARIF findings under rules not declared: ['other']"


def test_the_review_writes_a_contract_violation_at_its_line(tmp_path, monkeypatch):
    install_contract(monkeypatch)
    repo = fixture_repo(tmp_path)
    edit(repo, "std::memory_order_release);", "std::memory_order_relaxed);")
    sarif = tmp_path / "out/review.sarif"
    sarif.parent.mkdir()  # a file's folder must be there: a typo'd one is refused, not made
    status, result = reviewed(["HEAD", "--root", str(repo), "--sarif", str(sarif)])
    assert status == 1 and result.verdict is ReviewVerdict.CHANGES_NEEDED
    assert results(sarif) == [
        (
            "contract-violation",
            "error",
            f"{SRC}/main.cpp",
            RELEASE_LINE,
            "fx.producer.flag_release: no release order",
        )
    ]


def test_an_ok_review_writes_no_result(tmp_path, capsys, monkeypatch):
    install_contract(monkeypatch)
    repo = fixture_repo(tmp_path)
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    assert main(["HEAD", "--root", str(repo), "--sarif", str(tmp_path / "r.sarif")]) == 0
    assert results(tmp_path / "r.sarif") == []


def test_unsited_and_uncovered_findings_below_the_repository_top(tmp_path, capsys):
    """The project lies in sub/ of its repository: uris are named from the top."""
    top = tmp_path / "top"
    shutil.copytree(FIXTURE, top / "sub" / SRC)
    git(top, "init", "-q")
    git(top, "add", ".")
    git(top, "commit", "-qm", "base")
    repo = top / "sub"
    edit(
        repo,
        "  int mismatches = 0;\n",
        "  int mismatches = 0;\n  channel.flag.store(7, std::memory_order_release);\n"
        "  // @site fx.consumer.tally kind=compute\n  mismatches += 0;\n"
        "  // @end fx.consumer.tally\n",
    )
    sarif = tmp_path / "r.sarif"
    status = main(["HEAD", "--root", str(repo), "--no-generated", "--sarif", str(sarif)])
    assert status == 1
    main_cpp = f"sub/{SRC}/main.cpp"
    assert results(sarif) == [
        (
            "primitive-outside-site",
            "error",
            main_cpp,
            52,
            "ordering primitive store( outside any site",
        ),
        (
            "uncovered-site",
            "error",
            main_cpp,
            53,
            "fx.consumer.tally: no must-pass fault delays it",
        ),
    ]
    capsys.readouterr()


def test_a_change_failing_with_no_fault_is_at_its_first_changed_line(tmp_path, capsys):
    repo = fixture_repo(tmp_path)
    edit(  # outside every site
        repo,
        "return failed_rounds == 0 ? 0 : 1;",
        "return failed_rounds == 0 ? 2 : 1;",
    )
    git(repo, "commit", "-qam", "head: the driver exits 2 on success")
    sarif = tmp_path / "r.sarif"
    words = ["HEAD~1", "HEAD", "--root", str(repo), "--run", "--sarif", str(sarif)]
    status = main(words, workdir="w")
    assert status == 1
    log = tmp_path / "w/runs/change/control.clean/control.clean-default.log"
    assert results(sarif) == [
        (
            "change-fails-driver",
            "error",
            f"{SRC}/main.cpp",
            78,  # the line the change altered
            "the change fails the driver: exit 2 with no line naming a failure; its last "
            f"line: fixture rounds=4 failed=0 (config default; log: {log})",
        )
    ]
    capsys.readouterr()


def test_a_change_failing_with_no_fault_names_the_sites_it_touched(tmp_path, capsys):
    repo = fixture_repo(tmp_path)
    edit(
        repo,
        "channel.payload[word_idx] = expected(round_idx, word_idx);",
        "channel.payload[word_idx] = expected(round_idx, word_idx) + (word_idx == 5);",
    )
    git(repo, "commit", "-qam", "head: the producer stores one word wrong")
    sarif = tmp_path / "r.sarif"
    words = ["HEAD~1", "HEAD", "--root", str(repo), "--run", "--sarif", str(sarif)]
    assert main(words, workdir="w") == 1
    log = tmp_path / "w/runs/change/control.clean/control.clean-default.log"
    assert results(sarif) == [
        (
            "change-fails-driver",
            "error",
            f"{SRC}/main.cpp",
            36,  # the touched site's first line: the suspect, by name
            "fx.producer.payload_store: the change fails the driver: Mismatched payload "
            f"round=0 word=5 expected=6 got=7 (config default; log: {log})",
        )
    ]
    capsys.readouterr()


def test_a_touched_site_no_config_executes_is_no_coverage(tmp_path, capsys, progress):
    """A site the change adds where no run goes: its probe never prints, so
    no run covers it; its generated fault runs nowhere."""
    repo = fixture_repo(tmp_path)
    edit(
        repo,
        "  int mismatches = 0;\n",
        "  int mismatches = 0;\n  if (round_idx < 0) {\n    // @site fx.consumer.never kind=compute\n"
        "    mismatches += 0;\n    // @end fx.consumer.never\n  }\n",
    )
    git(repo, "commit", "-qam", "head: a site in a branch no round takes")
    sarif = tmp_path / "r.sarif"
    words = ["HEAD~1", "HEAD", "--root", str(repo), "--run", "--sarif", str(sarif)]
    status, result = reviewed(words, workdir="w")
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
    assert results(sarif) == [
        (
            "site-never-fires",
            "error",
            f"{SRC}/main.cpp",
            53,
            "fx.consumer.never: fires under: none; never under: default: no run covers it",
        )
    ]
    properties = json.loads(sarif.read_text())["runs"][0]["properties"]
    assert properties == {"sitesTouched": ["fx.consumer.never"], "wallSeconds": result.wall_s}
    assert 0 < result.wall_s < 600
    assert result.runs.unplaced == ["gen.delay.fx.consumer.never"]
    assert result.runs.faults == []
    every = "the change's tree, clean then with the forced failure, under every config here"
    assert progress == [  # no twin, no fault: nothing runs past the controls
        Planned(f"{every}: default", 2, 2, 0),
        Ran("change", CLEAN, "default", Verdict.PASSED, 1, 2),
        Ran("change", FORCED, "default", Verdict.KILLED, 2, 2),
    ]
    capsys.readouterr()


def test_a_run_review_where_no_config_runs_does_not_approve(tmp_path, capsys, progress):
    """Every config needs 4 GPUs and none is here: nothing runs, so the
    touched wait fires under no config (no coverage) and the review says it
    ran nothing: CHANGES NEEDED, never an approval with zero runs."""
    repo = fixture_repo(tmp_path)
    catalog = repo / SRC / "catalog.toml"
    four = catalog.read_text().replace('name = "default"\n', 'name = "default"\ngpus = 4\n')
    catalog.write_text(four)
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    git(repo, "commit", "-qam", "head: an ordering-neutral change no config here runs")
    sarif = tmp_path / "r.sarif"
    words = ["HEAD~1", "HEAD", "--root", str(repo), "--run", "--sarif", str(sarif)]
    status, result = reviewed(words, workdir="w")
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
    assert (result.runs.controls, result.runs.faults, progress) == ([], [], [])
    assert result.runs.plan.not_run == {"default": "needs 4 GPUs, 0 here"}
    assert results(sarif) == [
        (
            "site-never-fires",
            "error",
            f"{SRC}/main.cpp",
            48,
            "fx.consumer.flag_wait: fires under: none; no clean run here: no run covers it",
        ),
        (
            "nothing-ran",
            "error",
            f"{SRC}/catalog.toml",
            None,
            "no config runs here (each needs more GPUs than are here): the runs judged nothing",
        ),
    ]
    out = capsys.readouterr().out.splitlines()
    own = out.index("## The change's own run")
    assert out[own + 2 : own + 6] == [
        "- **no config runs here (each needs more GPUs than are here): the runs judged nothing**",
        "- The matrix: the catalog's configs; run here: none.",
        "- Configs not run here: default (needs 4 GPUs, 0 here).",
        "",
    ]


def test_a_touched_site_whose_must_pass_faults_ran_nowhere_is_a_finding():
    """A Review made by hand: the wait fires, yet none of its must-pass
    faults ran (their sites fire together under no config here)."""
    from faults.review.coverage import Coverage
    from faults.review.findings import findings
    from faults.review.matrix import Firing
    from faults.review.model import Review
    from faults.review.runs import RunReport
    from faults.review.static import ContractCheck
    from invariants.sync.sites import Site

    wait = Site("k.wait", "wait", "k.payload", Path("/t/src/k.cu"), 10, 12)
    gap = "no must-pass fault ran: D1 (their sites fire together under no config here)"
    clean = RunResult(CLEAN, "graph", 0, Verdict.PASSED, True, "", "0" * 64)
    runs = RunReport([clean], [], [], [], [], firing={"k.wait": Firing("k.wait", ["graph"])},
                     unplaced=["D1"], unrun={"k.wait": [gap]})  # fmt: skip
    touched = [Coverage(wait, passing=["D1"], failing=["S1"])]
    review = Review("main", "topic", Path("/t"), "src", {"k.cu": {11}}, touched, [],
                    ContractCheck(False, [], 0, 0), runs=runs)  # fmt: skip
    assert [(r.rule.id, r.level, r.finding) for r in findings(review, Path("."), None)] == [
        ("site-not-covered-by-run", Level.ERROR, Finding("src/k.cu", 10, gap, "k.wait"))
    ]
