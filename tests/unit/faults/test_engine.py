"""The whole pipeline on the CPU fixture: controls, sweep, reports, scratch
trees from the working tree and from git refs, and the user-tree guard."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from afdep.jit import CSRC, source_digest
from faults.catalog import load_catalog
from faults.cli import main
from faults.engine import Engine, RunResult
from faults.report import summary_line
from faults.scratch import UserTreeChanged, UserTreeGuard, make_scratch, tree_digest
from faults.verdict import Verdict

REPO = Path(__file__).parents[3]
CATALOG = REPO / "tests/fixtures/flag_payload/catalog.toml"
SOURCES = REPO / "tests/fixtures/flag_payload"


def test_engine_digest_rule_is_afdeps():
    assert tree_digest(CSRC) == source_digest()


@pytest.mark.parametrize("slots", [1, 2])
def test_sweep_reaches_every_verdict_and_leaves_the_user_tree_alone(tmp_path, capsys, slots):
    before = tree_digest(SOURCES)
    top = ["--catalog", str(CATALOG), "--root", str(REPO), "--no-generated"]
    status = main(
        [*top, "--workdir", str(tmp_path / "work"), "sweep", "--slots", str(slots)]
        + ["--results-dir", str(tmp_path)]
    )
    assert status == 1  # N1 never fires: its expectation is not met
    assert tree_digest(SOURCES) == before
    [report] = tmp_path.glob("sweep-*.json")  # sweep-<machine>.json
    document = json.loads(report.read_text())
    assert document["harness_ok"] and not document["ok"]
    controls = {r["fault"]: r["verdict"] for r in document["controls"]}
    assert controls == {"control.clean": "PASSED", "control.forced_fail": "KILLED"}
    verdicts = {r["fault"]: (r["verdict"], r["ok"]) for r in document["results"]}
    assert verdicts == {
        "D1": ("PASSED", True),
        "S1": ("KILLED", True),
        "S2": ("SURVIVED", True),
        "N1": ("NOT FIRED", False),
    }
    s2 = next(r for r in document["results"] if r["fault"] == "S2")
    assert (
        "hint: delay fx.producer.payload_store, the site fx.consumer.flag_wait guards"
        in s2["reason"]
    )
    for result in document["results"]:
        assert result["outcome"]["digests"] == [result["tree_digest"]]
        assert len(result["outcome"]["log_sha256"]) == 64
    s1 = next(r for r in document["results"] if r["fault"] == "S1")
    assert s1["outcome"]["markers"] == {"D1": 4, "S1": 4}
    assert set(document["stage_seconds"]) == {"apply", "build", "run", "judge"}
    assert 0 <= document["engine_share"] < 1
    out = capsys.readouterr().out
    assert "S1-default tree=" in out and "markers=4 assert=0 -> KILLED" in out


def test_a_broken_control_stops_the_sweep(tmp_path, capsys):
    text = CATALOG.read_text().replace("+ (word_idx == 3);", ";")
    broken = tmp_path / "catalog.toml"
    broken.write_text(text)
    top = ["--catalog", str(broken), "--root", str(REPO), "--workdir", str(tmp_path / "work")]
    status = main([*top, "sweep", "--results-dir", str(tmp_path)])
    assert status == 1
    [report] = tmp_path.glob("sweep-*.json")
    document = json.loads(report.read_text())
    assert not document["harness_ok"] and document["results"] == []
    assert "HARNESS BROKEN" in capsys.readouterr().out


def test_build_error_carries_the_compiler_log(tmp_path):
    catalog = load_catalog(CATALOG, tree_root=REPO)
    engine = Engine(catalog, REPO, tmp_path)
    from faults.catalog import Patch

    prepared = engine.prepare(
        "broken", patches=[Patch("B", file="main.cpp", old="int main()", new="int main(")]
    )
    assert prepared.error.verdict is Verdict.BUILD_ERROR
    assert "main.cpp" in prepared.error.reason and "error" in prepared.error.reason


def test_apply_error_is_a_verdict_not_a_crash(tmp_path):
    catalog = load_catalog(CATALOG, tree_root=REPO)
    engine = Engine(catalog, REPO, tmp_path)
    shutil.copytree(SOURCES, tmp_path / "other/tests/fixtures/flag_payload")
    main_cpp = tmp_path / "other/tests/fixtures/flag_payload/main.cpp"
    main_cpp.write_text(
        main_cpp.read_text().replace(
            "// @site fx.consumer.flag_wait", "// @site fx.consumer.renamed_wait"
        )
    )
    stale = Engine(catalog, tmp_path / "other", tmp_path / "work")
    results = stale.evaluate("S2", list(catalog.configs))
    assert [r.verdict for r in results] == [Verdict.APPLY_ERROR]
    assert "site fx.consumer.flag_wait is missing" in results[0].reason
    assert engine.catalog is catalog


def test_guard_fails_loudly_when_the_user_tree_changes(tmp_path):
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "a.cuh").write_text("x")
    with pytest.raises(UserTreeChanged, match="changed during the run"):
        with UserTreeGuard(sources):
            (sources / "a.cuh").write_text("y")


def test_scratch_from_a_git_ref(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(SOURCES, repo / "src")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "one",
        ],
        check=True,
    )
    committed = tree_digest(repo / "src")
    (repo / "src/main.cpp").write_text("changed in the working tree only")
    (repo / "src/untracked.txt").write_text("new")
    from_ref = make_scratch(repo, tmp_path / "from-ref", ref="HEAD")
    assert tree_digest(from_ref / "src") == committed
    working = make_scratch(repo, tmp_path / "working")
    assert (working / "src/main.cpp").read_text() == "changed in the working tree only"
    assert (working / "src/untracked.txt").exists() and not (working / ".git").exists()


def test_cli_list_show_apply(tmp_path, capsys):
    base = ["--catalog", str(CATALOG), "--root", str(REPO)]
    assert main([*base, "list"]) == 0
    assert "S1       expect=fail" in capsys.readouterr().out
    assert main([*base, "show", "S1"]) == 0
    assert "[D1] delay fx.producer.payload_store 200000000 ns" in capsys.readouterr().out
    out = tmp_path / "applied"
    assert main([*base, "apply", "S2", "--out", str(out)]) == 0
    assert "AFDFAULT S2 skip" in (out / "tests/fixtures/flag_payload/main.cpp").read_text()
    assert main([*base, "apply", "S2", "--out", str(out)]) == 2  # never overwrites
    assert main([*base, "show", "ZZ"]) == 2
    assert "no fault 'ZZ'" in capsys.readouterr().err


def test_a_reused_workdir_rebuilds_its_scratch_trees(tmp_path):
    catalog = load_catalog(CATALOG, tree_root=REPO)
    first = Engine(catalog, REPO, tmp_path).prepare("D1", "D1")
    (first.tree / "stale").write_text("from an earlier sweep")
    again = Engine(catalog, REPO, tmp_path).prepare("D1", "D1")
    assert again.error is None and again.digest == first.digest
    assert not (again.tree / "stale").exists()


def test_a_failed_report_write_keeps_the_old_report_and_no_temporary(tmp_path):
    from hostio import write_json, write_text

    report = tmp_path / "report.json"
    write_json(report, {"ok": True})
    with pytest.raises(UnicodeEncodeError):  # fails part-way through the write
        write_text(report, "{" + "\udc80")
    assert report.read_text() == '{\n "ok": true\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def n2_result(**outcome) -> RunResult:
    counts = dict(exit_code=1, mismatches=0, timeout_lines=0, assertion_lines=26)
    return RunResult(
        "N2",
        "bf16-eager",
        0,
        Verdict.KILLED,
        True,
        "the run failed and said why: 26 assertion lines",
        "ab" * 32,
        outcome={**counts, "markers": {"N2": 12, "P1": 40}, **outcome},
    )


def test_summary_line_names_device_errors_only_when_there_are_some():
    line = "N2-bf16-eager tree=abababab exit=1 mismatch=0 timeout_msgs=0 markers=12 assert=26"
    assert summary_line(n2_result(device_errors=0)) == f"{line} -> KILLED"
    assert summary_line(n2_result()) == f"{line} -> KILLED"  # a report from before the field
    assert summary_line(n2_result(device_errors=3)) == f"{line} device_err=3 -> KILLED"


def test_a_result_holds_a_verdict_and_writes_its_word():
    result = RunResult("N1", "default", 0, "NOT FIRED", False, "r", "d")
    assert result.verdict is Verdict.NOT_FIRED
    written = result.to_dict()["verdict"]
    assert type(written) is str and written == "NOT FIRED"
    assert json.loads(json.dumps(n2_result().to_dict()))["verdict"] == "KILLED"
    assert summary_line(result) == "N1-default tree=d NOT FIRED: r"


def test_a_must_fail_fault_that_crashes_the_target_is_killed_by_its_device_error(tmp_path):
    """The fixture's device error is an uncaught exception (its catalog's
    `device_error`): the run aborts, says so, and the fault is KILLED."""
    from dataclasses import replace

    from faults.catalog import Fault, Patch

    catalog = load_catalog(CATALOG, tree_root=REPO)
    crash = Patch(
        "E1",
        file="main.cpp",
        old='std::printf("fixture rounds=%d failed=%d\\n", kRounds, failed_rounds);',
        new="std::fflush(stdout); throw 1;",
    )
    marker = Patch("E1", site="fx.producer.flag_release", action="delay", ns=1)
    fault = Fault("E1", "the target crashes", "fail", (crash, marker))
    catalog = replace(catalog, faults={**catalog.faults, "E1": fault})
    [result] = Engine(catalog, REPO, tmp_path).evaluate("E1", list(catalog.configs))
    assert (result.verdict, result.ok) == (Verdict.KILLED, True)
    assert result.reason == "the run failed and said why: 1 device error line"
    assert result.outcome["exit_code"] == -6  # SIGABRT
    assert summary_line(result).endswith("markers=4 assert=0 device_err=1 -> KILLED")
