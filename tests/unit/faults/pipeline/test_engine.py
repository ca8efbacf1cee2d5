"""The whole pipeline on the CPU fixture: controls, sweep, reports, scratch
trees from the working tree and from git refs, and the user-tree guard."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from afdep.jit import CSRC, source_digest
from faults.catalog import load_catalog
from faults.judge.run_result import RunResult
from faults.judge.verdict import Verdict
from faults.pipeline.engine import Engine
from faults.pipeline.scratch import (
    ScratchExists,
    UserTreeChanged,
    UserTreeGuard,
    make_scratch,
    tree_digest,
)
from faults.report.document import summary_line
from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]
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
    assert set(document["stage_seconds"]) == {"apply", "build", "sass", "run", "judge"}
    assert 0 <= document["engine_share"] < 1
    out = capsys.readouterr().out
    assert "S1@default#0 tree=" in out and "markers=4 assert=0 -> KILLED" in out


def test_a_run_report_says_the_machine_and_rank_mode_it_ran_on(tmp_path, capsys):
    top = ["--catalog", str(CATALOG), "--root", str(REPO), "--no-generated"]
    report = tmp_path / "run.json"
    assert main([*top, "run", "S1", "--repeat", "2", "--report", str(report)]) == 0
    document = json.loads(report.read_text())
    assert (document["machine"], document["rank_mode"]) == ("cpu", "per-gpu")
    assert [(r["fault"], r["repeat"], r["verdict"]) for r in document["results"]] == [
        ("S1", 0, "KILLED"),
        ("S1", 1, "KILLED"),
    ]
    assert set(document["stage_seconds"]) == {"apply", "build", "sass", "run", "judge"}


def test_a_spent_budget_starts_no_fault_and_names_those_not_run(tmp_path, capsys):
    """The controls run whatever the budget; past it no fault starts, and the
    report, a partial shard, says which are left and is not ok."""
    top = ["--catalog", str(CATALOG), "--root", str(REPO), "--no-generated"]
    status = main(
        [*top, "--workdir", str(tmp_path / "work"), "sweep", "--budget-s", "0.001"]
        + ["--results-dir", str(tmp_path)]
    )
    assert status == 1
    [report] = tmp_path.glob("sweep-*.json")
    document = json.loads(report.read_text())
    assert document["harness_ok"] and not document["ok"]
    assert (document["budget_s"], document["unrun"]) == (0.001, ["D1", "S1", "S2", "N1"])
    assert document["results"] == [] and document["faults"] == []
    out = capsys.readouterr().out
    assert (
        "the 0.001 s budget is spent: 4 faults not run; the next shard: --only 'D1|S1|S2|N1'" in out
    )
    assert "- **not run**, the 0.001 s budget spent: 4 faults (D1, S1, S2, N1)" in out


def test_the_rest_of_a_shard_runs_what_its_budget_left(tmp_path, capsys):
    """--rest-of REPORT: the next shard runs the faults the first left, under
    its configs, with no --only on a command line that could not hold them."""
    top = ["--catalog", str(CATALOG), "--root", str(REPO), "--no-generated"]
    first = tmp_path / "first"
    main(
        [*top, "--workdir", str(tmp_path / "w1"), "sweep", "--budget-s", "0.001"]
        + ["--results-dir", str(first)]
    )
    [report] = first.glob("sweep-*.json")
    head = json.loads(report.read_text())
    second = tmp_path / "second"
    words = ["sweep", "--rest-of", str(report), "--results-dir", str(second)]
    assert main([*top, "--workdir", str(tmp_path / "w2"), *words]) == 1  # N1 never fires
    [rest] = second.glob("sweep-*.json")
    document = json.loads(rest.read_text())
    assert sorted(r["fault"] for r in document["results"]) == ["D1", "N1", "S1", "S2"]
    assert document["gpus_needed"] == head["gpus_needed"] and document["unrun"] == []


def test_the_rest_of_a_shard_is_refused_before_any_work(tmp_path, capsys):
    top = ["--catalog", str(CATALOG), "--root", str(REPO), "--no-generated"]
    report = tmp_path / "shard.json"
    sha = hashlib.sha256(CATALOG.read_bytes()).hexdigest()
    cases = [
        (
            {"results": [], "catalog_sha256": "ab" * 32, "unrun": ["S1"]},
            [],
            f"a sweep of another catalog (sha256 abababababab, {CATALOG} is {sha[:12]})",
        ),
        ({"results": [], "catalog_sha256": sha, "unrun": []}, [], "its budget left no fault unrun"),
        (
            {"results": [], "catalog_sha256": sha, "unrun": ["S1"]},
            ["--only", "S2"],
            "--only chooses the faults too; give one of them",
        ),
    ]
    for document, extra, message in cases:
        report.write_text(json.dumps(document))
        words = ["sweep", "--rest-of", str(report), *extra]
        assert main([*top, "--workdir", str(tmp_path / "w"), *words]) == 2
        err = capsys.readouterr().err
        assert err == f"python -m faults: error: sweep: --rest-of {report}: {message}\n"
        assert not any((tmp_path / "w").glob("*"))  # no tree made, no report written


def test_the_controls_run_under_the_configs_the_selected_faults_run_under(tmp_path, capsys):
    """A shard of faults that run under one config checks the harness under
    that config only; a fault of every config brings every config's controls."""
    text = CATALOG.read_text().replace(
        '[[config]]\nname = "default"\n',
        '[[config]]\nname = "default"\n\n[[config]]\nname = "other"\n',
    )
    text = text.replace('id = "S2"\n', 'id = "S2"\nconfigs = ["other"]\n')
    two = tmp_path / "catalog.toml"
    two.write_text(text)
    top = ["--catalog", str(two), "--root", str(REPO), "--no-generated"]
    for only, configs in (("S2", {"other"}), ("S1", {"default", "other"})):
        out = tmp_path / only
        words = ["sweep", "--only", only, "--results-dir", str(out)]
        main([*top, "--workdir", str(tmp_path / f"w-{only}"), *words])
        [report] = out.glob("sweep-*.json")
        document = json.loads(report.read_text())
        assert document["harness_ok"]
        controls = sorted((r["fault"], r["config"]) for r in document["controls"])
        assert controls == sorted(
            (label, c) for label in ("control.clean", "control.forced_fail") for c in configs
        )
        assert {r["config"] for r in document["results"]} == configs


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
    line = "N2@bf16-eager#0 tree=abababab exit=1 mismatch=0 timeout_msgs=0 markers=12 assert=26"
    assert summary_line(n2_result(device_errors=0)) == f"{line} -> KILLED"
    assert summary_line(n2_result()) == f"{line} -> KILLED"  # a report from before the field
    assert summary_line(n2_result(device_errors=3)) == f"{line} device_err=3 -> KILLED"


def test_a_result_holds_a_verdict_and_writes_its_word():
    result = RunResult("N1", "default", 0, "NOT FIRED", False, "r", "d")
    assert result.verdict is Verdict.NOT_FIRED
    written = result.to_dict()["verdict"]
    assert type(written) is str and written == "NOT FIRED"
    assert json.loads(json.dumps(n2_result().to_dict()))["verdict"] == "KILLED"
    assert summary_line(result) == "N1@default#0 tree=d NOT FIRED: r"


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
        marker_site="fx.producer.flag_release",  # the change lies in no site region
    )
    fault = Fault("E1", "the target crashes", "fail", (crash,))
    catalog = replace(catalog, faults={**catalog.faults, "E1": fault})
    [result] = Engine(catalog, REPO, tmp_path).evaluate("E1", list(catalog.configs))
    assert (result.verdict, result.ok) == (Verdict.KILLED, True)
    assert result.reason == "the run failed and said why: 1 device error line"
    assert result.outcome["exit_code"] == -6  # SIGABRT
    assert summary_line(result).endswith("markers=4 assert=0 device_err=1 -> KILLED")


BUILD = re.compile(r"^build = \[.*?\]$", re.DOTALL | re.MULTILINE)


def fixture_catalog(tmp_path: Path, *, build: str | None = None, **changes: str):
    """The CPU fixture's catalog, loaded from `tmp_path`, with its build words
    `build` and each (old, new) text of `changes` replaced."""
    text = CATALOG.read_text()
    if build is not None:
        text = BUILD.sub(f"build = {build}", text)
    for old, new in changes.values():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    return load_catalog(path, tree_root=REPO)


def test_a_build_command_that_does_not_exist_is_a_build_error(tmp_path):
    catalog = fixture_catalog(tmp_path, build='["no-such-gxx", "main.cpp"]')
    prepared = Engine(catalog, REPO, tmp_path / "work").prepare("clean", patches=())
    assert prepared.error.verdict is Verdict.BUILD_ERROR
    assert prepared.error.reason == (
        f"build of {tmp_path}/work/clean/tree could not start 'no-such-gxx': "
        "[Errno 2] No such file or directory: 'no-such-gxx'"
    )


def test_a_build_past_the_timeout_says_it_timed_out(tmp_path):
    catalog = fixture_catalog(
        tmp_path, build='["sleep", "30"]', timeout=("timeout_s = 60", "timeout_s = 0.5")
    )
    prepared = Engine(catalog, REPO, tmp_path / "work").prepare("clean", patches=())
    assert prepared.error.verdict is Verdict.BUILD_ERROR
    assert prepared.error.reason == f"build of {tmp_path}/work/clean/tree timed out after 0.5 s:\n"


BAD_WHEN = ('when = "round_idx < 0"', 'when = "round_idx <<< 0"')  # not C: g++ fails


def compiler_error(log: Path, tree: Path) -> str:
    """The compiler's one error line in a build log, the scratch tree's path taken out."""
    [line] = [line for line in log.read_text().splitlines() if ": error: " in line]
    return line.replace(f"{tree}/", "")


def test_a_build_error_says_the_compilers_error_line(tmp_path):
    catalog = fixture_catalog(tmp_path, when=BAD_WHEN)
    [result] = Engine(catalog, REPO, tmp_path / "work").evaluate("N1", list(catalog.configs))
    tree = tmp_path / "work/N1/tree"
    error = compiler_error(tmp_path / "work/N1/build.log", tree)
    assert error.startswith("tests/fixtures/flag_payload/main.cpp:")  # the tree's path taken out
    assert (result.verdict, result.ok) == (Verdict.BUILD_ERROR, False)
    first, tail = result.reason.split("\n", 1)
    assert first == f"build of {tree} failed (exit 1): {error}"
    assert tail == (tmp_path / "work/N1/build.log").read_text()  # the log's tail after it
    assert (
        summary_line(result) == f"N1@default#0 tree={result.tree_digest[:8]} BUILD ERROR: {first}"
    )


def test_run_prints_the_build_errors_reason(tmp_path, capsys):
    catalog = fixture_catalog(tmp_path, when=BAD_WHEN).path
    work = tmp_path / "work"
    top = ["--catalog", str(catalog), "--root", str(REPO), "--workdir", str(work)]
    assert main([*top, "run", "N1"]) == 1
    tree = work / "N1/tree"
    error = compiler_error(work / "N1/build.log", tree)
    [line] = capsys.readouterr().out.splitlines()
    assert line == (
        f"N1@default#0 tree={tree_digest(tree / 'tests/fixtures/flag_payload')[:8]} "
        f"BUILD ERROR: build of {tree} failed (exit 1): {error}"
    )


def test_a_build_log_says_its_last_error_lines_in_one_line(tmp_path):
    from faults.pipeline.run import log_said

    tree = tmp_path / "tree"
    log = "\n".join(
        [
            "compiling",
            f"{tree}/a.cu(3): error: one",
            f"{tree}/a.cu(4): error: two",
            "  context",
            "Traceback (most recent call last):",
            "CompileError: three",
            "",
        ]
    )
    assert log_said(log, tree) == "a.cu(3): error: one | a.cu(4): error: two | CompileError: three"
    assert log_said("no word of it\nlast\n", tree) == "no word of it | last"
    assert log_said("", tree) == ""


def test_the_afdep_builds_refusal_of_a_stray_variable_is_the_reason(tmp_path, monkeypatch, capsys):
    """A stray AFDEP_* variable that reaches a build (a catalog without
    [target.knobs], whose doors do not check it): afdep's build command
    refuses it in one line, and that line is the unpatched tree's BUILD
    ERROR reason (the engine knows no AFDEP_). With afdep's [target.knobs]
    the command refuses it at its door, before any work."""
    from afdep.config import KNOBS

    monkeypatch.setenv("AFDEP_TIMOUT_MS", "3")
    text = (REPO / "catalogs/afdep.toml").read_text()
    knobs = '[target.knobs]\nprefix = "AFDEP_"\ncheck = ["{python}", "-m", "tools.knobs"]\n'
    assert knobs in text
    unchecked = tmp_path / "afdep-unchecked.toml"
    unchecked.write_text(text.replace(knobs, ""))
    work = tmp_path / "work"
    sweep = ["--no-generated", "--workdir", str(work), "sweep", "--only", "P1"]
    sweep += ["--results-dir", str(tmp_path / "results")]
    assert main(["--catalog", str(unchecked), "--root", str(REPO), *sweep]) == 1
    lines = capsys.readouterr().out.splitlines()
    said = (
        f"the unpatched tree does not build: build of {work}/control.clean/tree failed (exit 2): "
        f"error: unknown afdep variable AFDEP_TIMOUT_MS; known: {sorted(KNOBS)}"
    )
    assert any(line.endswith(f"]  {said}") for line in lines), lines  # after its progress lead
    assert lines[-1] == "exit 1: 1 of 1 trees not ok: control.clean (BUILD ERROR)"
    shutil.rmtree(work)
    catalog = ["--catalog", str(REPO / "catalogs/afdep.toml"), "--root", str(REPO)]
    assert main([*catalog, *sweep]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "AFDEP_TIMOUT_MS" in err and not work.exists()


def test_the_catalogs_target_env_over_yours_is_said_at_the_start(tmp_path, monkeypatch, capsys):
    catalog = fixture_catalog(
        tmp_path, env=("timeout_s = 60", 'timeout_s = 60\nenv = { FX_A = "1", FX_B = "2" }')
    ).path
    monkeypatch.setenv("FX_A", "5")  # differs: said
    monkeypatch.setenv("FX_B", "2")  # the same: nothing to say
    top = ["--catalog", str(catalog), "--root", str(REPO), "--no-generated"]
    said = "the catalog's [target.env] wins over your environment: FX_A=1 (yours: 5)"
    assert main([*top, "--workdir", str(tmp_path / "run"), "run", "D1"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == said
    sweep = ["sweep", "--only", "D1", "--results-dir", str(tmp_path / "results")]
    assert main([*top, "--workdir", str(tmp_path / "sweep"), *sweep]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith(f"]  {said}")  # after its lead
    monkeypatch.delenv("FX_A")
    assert main([*top, "--workdir", str(tmp_path / "again"), "run", "D1"]) == 0
    assert "[target.env]" not in capsys.readouterr().out


def test_gpus_in_a_build_word_is_the_largest_configs(tmp_path):
    catalog = fixture_catalog(
        tmp_path,
        build='["sh", "-c", "echo gpus={gpus}"]',
        target=("timeout_s = 60", "timeout_s = 60\ngpus = 2"),
        config=('name = "default"', 'name = "default"\n[[config]]\nname = "four"\ngpus = 4'),
    )
    engine = Engine(catalog, REPO, tmp_path / "work")
    assert engine.prepare("clean", patches=()).error is None
    assert (tmp_path / "work/clean/build.log").read_text() == "gpus=4\n"


def test_a_run_command_that_does_not_exist_breaks_the_run_not_the_engine(tmp_path, capsys):
    catalog = fixture_catalog(
        tmp_path, build="[]", run=('run = ["{out}/flag_payload"]', 'run = ["no-such-program"]')
    )
    engine = Engine(catalog, REPO, tmp_path / "work")
    missing = "could not start 'no-such-program': [Errno 2] No such file or directory: "
    [result] = engine.evaluate("S1", list(catalog.configs))
    assert (result.verdict, result.ok, result.outcome) == (Verdict.BROKE, False, None)
    assert result.reason == f"run of {tmp_path}/work/S1/tree {missing}'no-such-program'"
    # The clean control broke, so the forced-fail control is not run: on a
    # tree that fails alone it would say nothing of the harness.
    controls = engine.controls(list(catalog.configs))
    assert [(r.fault, r.verdict, r.reason) for r in controls] == [
        (
            "control.clean",
            Verdict.BROKE,
            f"run of {tmp_path}/work/control.clean/tree {missing}'no-such-program'",
        )
    ]
    top = ["--catalog", str(catalog.path), "--root", str(REPO), "--no-generated"]
    status = main(
        [*top, "--workdir", str(tmp_path / "sweep"), "sweep"] + ["--results-dir", str(tmp_path)]
    )
    assert status == 1  # the controls broke: the harness is broken, and said so
    assert "HARNESS BROKEN" in capsys.readouterr().out


def test_a_scratch_tree_is_never_made_over_an_earlier_one(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.cu").write_text("x\n")
    (tmp_path / "dest").mkdir()  # empty: fine
    assert (make_scratch(tmp_path / "src", tmp_path / "dest") / "a.cu").read_text() == "x\n"
    with pytest.raises(ScratchExists) as error:
        make_scratch(tmp_path / "src", tmp_path / "dest")
    assert str(error.value) == f"{tmp_path / 'dest'}: already exists; give a fresh --workdir"
    assert (tmp_path / "dest/a.cu").read_text() == "x\n"  # left as it was


def test_a_contract_violation_is_said_from_its_trees_root(tmp_path):
    """A survivor's reason outlives its scratch tree: the contract's findings
    name files from the tree's root, as the review does."""
    from invariants.sync.finding import Finding

    tree = tmp_path / "S1" / "tree"
    found = Finding(str(tree / "afdep/csrc/a.cuh"), 12, "no bar.sync", "k.p", "v1")
    assert str(found.from_root(tree)) == "afdep/csrc/a.cuh:12: k.p [v1]: no bar.sync"
    outside = Finding("/elsewhere/a.cuh", 1, "x", "k.p")
    assert str(outside.from_root(tree)) == "/elsewhere/a.cuh:1: k.p: x"


def test_runs_started_several_at_a_time_each_get_their_share_of_the_cpu(tmp_path, monkeypatch):
    """The engine's run environment: the caller's (a GPU group) over each
    run's share of the cores (hostio.cpu_share), none unless asked."""
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    catalog = load_catalog(CATALOG)
    group = {"CUDA_VISIBLE_DEVICES": "1"}
    assert Engine(catalog, REPO, tmp_path, env=group).env == group
    shared = Engine(catalog, REPO, tmp_path, env=group, runs_at_once=8).env
    assert shared == {"OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "1"}
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # the caller's own setting stands
    assert Engine(catalog, REPO, tmp_path, runs_at_once=8).env == {}


def test_the_configs_a_clean_run_brings_run_clean_in_the_same_slots(tmp_path):
    """`then` (the review's exposure twins): asked of each passing clean run
    of the given configs, never of its own configs' runs; what it names runs
    clean only, listed after the given configs' clean runs."""
    from dataclasses import replace

    from faults.catalog import Config

    catalog = load_catalog(CATALOG, tree_root=REPO)
    [default] = catalog.configs
    larger = replace(default, name="default@larger", base="default")
    catalog = replace(catalog, configs=(default, larger))
    asked: list[str] = []

    def then(result: RunResult) -> list[Config]:
        asked.append(result.config)
        return [larger]

    engine = Engine(catalog, REPO, tmp_path / "work")
    found = engine.controls([default], slots=2, then=then)
    assert asked == ["default"]
    assert [(r.fault, r.config, r.verdict) for r in found] == [
        ("control.clean", "default", Verdict.PASSED),
        ("control.clean", "default@larger", Verdict.PASSED),
        ("control.forced_fail", "default", Verdict.KILLED),
    ]
