"""faults.review.review on synthetic git repositories built from the CPU fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.judge.verdict import Verdict
from faults.pipeline.engine import RunResult
from faults.review.runs import first_failure
from tests.unit.faults.gitrepo import git
from tools.faults_cli.main import main as faults_main

FIXTURE = Path(__file__).parents[4] / "tests/fixtures/flag_payload"
SRC = "tests/fixtures/flag_payload"


def fixture_repo(tmp_path: Path) -> Path:
    """A git repository holding the CPU fixture at SRC, one commit."""
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root / SRC)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return root


@pytest.fixture
def repo(tmp_path) -> Path:
    return fixture_repo(tmp_path)


def edit(repo: Path, old: str, new: str) -> None:
    path = repo / SRC / "main.cpp"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))


def main(words: list[str], catalog: Path | None = None, workdir: str = "work") -> int:
    """`afdep-faults review WORDS` on the repository `words` names after --root."""
    repo = Path(words[words.index("--root") + 1])
    top = ["--root", str(repo), "--catalog", str(catalog or repo / SRC / "catalog.toml")]
    top += ["--workdir", str(repo.parent / workdir)]
    if "--no-generated" in words:
        top.append("--no-generated")
    at = words.index("--root")
    rest = [w for w in words[:at] + words[at + 2 :] if w != "--no-generated"]
    return faults_main([*top, "review", *rest])


def review(repo: Path, capsys, *extra: str) -> tuple[int, str]:
    status = main(["HEAD", "--root", str(repo), *extra])
    return status, capsys.readouterr().out


def test_clean_diff_passes(repo, capsys):
    status, out = review(repo, capsys)
    assert status == 0
    assert "None: the change leaves every synchronization site as it was." in out


def test_release_added_outside_a_site_is_flagged(repo, capsys):
    edit(
        repo,
        "int mismatches = 0;\n",
        "int mismatches = 0;\n  channel.flag.store(7, std::memory_order_release);\n",
    )
    status, out = review(repo, capsys)
    assert status == 1
    assert "main.cpp:" in out and "ordering primitive store( outside any site" in out


def test_new_site_with_no_fault_is_flagged(repo, capsys):
    edit(
        repo,
        "  int mismatches = 0;\n",
        "  int mismatches = 0;\n  // @site fx.consumer.tally kind=compute\n"
        "  mismatches += 0;\n  // @end fx.consumer.tally\n",
    )
    status, out = review(repo, capsys, "--no-generated")
    assert status == 1
    assert (
        "`fx.consumer.tally` (compute" in out and "UNCOVERED: no must-pass fault delays it" in out
    )
    status, out = review(repo, capsys)  # generated faults cover it
    assert status == 0 and "must pass: gen.delay.fx.consumer.tally" in out


def test_change_inside_a_covered_site_lists_its_faults(repo, capsys):
    edit(
        repo,
        "for (int word_idx = 0; word_idx < kWords; ++word_idx) channel.payload",
        "for (int word_idx = 0; word_idx != kWords; ++word_idx) channel.payload",
    )
    status, out = review(repo, capsys)
    assert status == 0
    assert "`fx.producer.payload_store` (store" in out and ": covered" in out
    assert "must pass: D1, gen.delay.fx.producer.payload_store" in out
    assert "must fail: S1, gen.skip.fx.consumer.flag_wait" in out


def test_run_executes_the_covering_faults_on_head(repo, capsys):
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    git(repo, "commit", "-qam", "head")
    status = main(["HEAD~1", "HEAD", "--root", str(repo), "--run"], workdir="w")
    out = capsys.readouterr().out
    assert "# Ordering review: HEAD~1..HEAD\n" in out
    assert (
        "- S1 [default]: KILLED" in out
        and "- gen.skip.fx.consumer.flag_wait [default]: KILLED" in out
    )
    assert "- D1 [default]: PASSED" in out and "- S2 [default]: SURVIVED" in out
    assert "- control.clean [default]: PASSED" in out
    assert "- control.forced_fail [default]: KILLED" in out
    assert (
        "- The change's tree passes the driver with no fault (config default).\n"
        "- BASE's tree: not run (the change's tree passes: nothing to tell apart).\n"
    ) in out
    assert (
        "  - ran: D1 [default] PASSED, gen.delay.fx.producer.payload_store [default] PASSED, "
        "S1 [default] KILLED, S2 [default] SURVIVED, gen.skip.fx.consumer.flag_wait [default] "
        "KILLED\n"
    ) in out
    assert status == 0


def test_run_judges_no_fault_when_a_control_is_wrong(repo, capsys):
    catalog = repo / SRC / "catalog.toml"
    catalog.write_text(catalog.read_text().replace("+ (word_idx == 3);", ";"))
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    git(repo, "commit", "-qam", "head: a forced failure that fails nothing")
    status = main(
        [
            "HEAD~1",
            "HEAD",
            "--root",
            str(repo),
            "--run",
            "--report",
            str(repo.parent / "r.md"),
            "--sarif",
            str(repo.parent / "r.sarif"),
        ],
        catalog,
        workdir="w",
    )
    out = capsys.readouterr().out
    assert status == 1
    assert "- control.forced_fail [default]: SURVIVED" in out
    assert (
        "- **the harness is broken: the forced-fail control was not killed: SURVIVED: the "
        "forced failure was not detected: the harness cannot see a failure, so no fault can be "
        "judged (config default)**\n" in out
    )
    assert "- S1 [default]" not in out and "Verdict: HARNESS BROKEN\n" in out
    [result] = json.loads((repo.parent / "r.sarif").read_text())["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("harness-broken", "warning")
    assert result["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": f"{SRC}/catalog.toml", "uriBaseId": "%SRCROOT%"}
            }
        }
    ]
    assert (repo.parent / "r.md").read_text() == out[:-1]


def test_a_pure_deletion_inside_a_site_touches_it(repo, capsys):
    edit(repo, "  channel.flag.store(round_idx + 1, std::memory_order_release);\n", "")
    _, out = review(repo, capsys)  # its verdict is the publish contract's to give
    assert "`fx.producer.flag_release` (release" in out
    assert "`fx.producer.payload_store`" not in out


ONE_WORD_OFF = "const int got = channel.payload[word_idx] + (word_idx == 5);"


def test_a_change_that_fails_with_no_fault_is_named_not_the_harness(repo, capsys):
    edit(repo, "const int got = channel.payload[word_idx];", ONE_WORD_OFF)
    git(repo, "commit", "-qam", "head: the check reads one word wrong")
    status = main(["HEAD~1", "HEAD", "--root", str(repo), "--run"], workdir="w")
    out = capsys.readouterr().out
    log = repo.parent / "w/runs/change/control.clean/control.clean-default.log"
    assert (
        "- **the change fails the driver: Mismatched payload round=0 word=5 expected=6 got=7 "
        f"(config default; log: {log})**\n- BASE's tree with no fault [default]: PASSED\n"
    ) in out
    assert (
        "- control.clean [default]: BROKE (the change fails the driver: Mismatched payload "
        "round=0 word=5 expected=6 got=7)\n"
    ) in out
    assert "harness" not in out
    assert "  - ran: none (a control was wrong: no fault judged)\n" in out
    assert status == 1 and out.endswith("Verdict: CHANGES NEEDED\n\n")


def test_base_failing_with_no_fault_too_is_a_broken_harness(repo, capsys):
    edit(repo, "const int got = channel.payload[word_idx];", ONE_WORD_OFF)
    git(repo, "commit", "-qam", "base: the check reads one word wrong")
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    git(repo, "commit", "-qam", "head: an ordering-neutral change")
    status = main(["HEAD~1", "HEAD", "--root", str(repo), "--run"], workdir="w")
    out = capsys.readouterr().out
    log = repo.parent / "w/runs/base/control.clean/control.clean-default.log"
    assert (
        "- **the harness is broken: BASE's tree fails the driver too, with no fault: Mismatched "
        f"payload round=0 word=5 expected=6 got=7 (config default; log: {log})**\n"
        "- BASE's tree with no fault [default]: BROKE\n"
    ) in out
    assert "the change fails" not in out
    assert status == 1 and out.endswith("Verdict: HARNESS BROKEN\n\n")


def failed_run(tmp_path: Path, verdict, reason: str, log: str | None, **outcome) -> RunResult:
    path = tmp_path / "run.log"
    if log is not None:
        path.write_text(log)
    fields = {"exit_code": 1, "outer_timeout": False, "timeout_s": 60.0, "log_path": str(path)}
    return RunResult(
        "control.clean", "default", 0, verdict, False, reason, "d" * 64, {},
        None if log is None else {**fields, **outcome},
    )  # fmt: skip


@pytest.mark.parametrize(
    "verdict, reason, log, outcome, said",
    [
        (Verdict.BUILD_ERROR, "g++: error: x\nmore", None, {}, "BUILD ERROR: g++: error: x"),
        (
            Verdict.TIMED_OUT,
            "",
            "started\n",
            {"outer_timeout": True, "exit_code": None},
            "the outer timeout (60 s) ended the run: it hangs",
        ),
        (
            Verdict.BROKE,
            "",
            "hello\nMismatched payload round=1\nterminate called\n",
            {},
            "Mismatched payload round=1",
        ),
        (
            Verdict.BROKE,
            "",
            "hello\nbye\n\n",
            {"exit_code": 3},
            "exit 3 with no line naming a failure; its last line: bye",
        ),
        (
            Verdict.WRONG_TREE,
            "the log's digest is not the scratch tree's",
            "fixture rounds=4 failed=0\n",
            {"exit_code": 0},
            "WRONG TREE: the log's digest is not the scratch tree's",
        ),
    ],
)
def test_a_failed_clean_run_is_said_by_its_first_failing_line(
    tmp_path, verdict, reason, log, outcome, said
):
    patterns = load_catalog(FIXTURE / "catalog.toml").target.log
    assert first_failure(failed_run(tmp_path, verdict, reason, log, **outcome), patterns) == said


def test_the_review_runs_its_controls_and_must_pass_faults_in_slots(monkeypatch, tmp_path):
    import faults.review.runs as runs
    from faults.catalog import load_catalog

    seen = {}

    def fake_sweep(engines, ids, configs, repeats, on_results, slots=1):
        seen.update(ids=ids, slots=slots, repeats=repeats)
        return [], []

    monkeypatch.setattr(runs, "sweep", fake_sweep)
    monkeypatch.setattr(runs, "gpu_count", lambda: 2)
    catalog = load_catalog(Path(__file__).parents[4] / "catalogs/afdep.toml")
    report = runs.run_review([], catalog, tmp_path, tmp_path, "B", tmp_path / "w", slots=3)
    assert seen == {"ids": [], "slots": 3, "repeats": 1} and report.ok


def test_the_review_runs_only_the_configs_its_covering_faults_run_under():
    from faults.catalog import load_catalog
    from faults.review.runs import review_configs
    from hostio import RankMode

    catalog = load_catalog(Path(__file__).parents[4] / "catalogs/afdep.toml")
    logical = catalog.in_rank_mode(RankMode.LOGICAL)
    assert review_configs(logical, ["N2u"], 1) == ["bf16-graph-ungate"]
    # review --run adds the twins: an epoch off by one shows only there
    twins = logical.with_exposure()
    assert review_configs(twins, ["N2u"], 1) == ["bf16-graph-ungate", "bf16-graph-ungate@2048"]
    assert review_configs(catalog, ["P1", "N2u"], 2) == [
        "bf16-eager",
        "bf16-graph",
        "fp8-eager",
        "bf16-graph-ungate",
    ]
    assert review_configs(logical, [], 1) == [c.name for c in catalog.configs]


def test_a_forced_failure_on_a_change_that_fails_alone_does_not_blame_the_harness(
    monkeypatch, tmp_path
):
    import faults.review.runs as runs
    from faults.catalog import load_catalog
    from faults.judge.verdict import Verdict
    from faults.pipeline.engine import CLEAN, FORCED, RunResult

    def result(fault, config, verdict, ok):
        return RunResult(fault, config, 0, verdict, ok, f"{verdict.value} here", "0" * 64)

    controls = [
        result(CLEAN, "bf16-eager", Verdict.BROKE, False),
        result(FORCED, "bf16-eager", Verdict.TIMED_OUT, False),  # hangs where the change hangs
        result(CLEAN, "bf16-graph", Verdict.PASSED, True),
        result(FORCED, "bf16-graph", Verdict.SURVIVED, False),  # here the harness is blind
    ]

    class BasePasses:
        def __init__(self, *args, **kwargs):
            pass

        def controls(self, configs, slots=1):
            seen_slots.append(slots)
            return [result(CLEAN, c.name, Verdict.PASSED, True) for c in configs]

    seen_slots = []
    monkeypatch.setattr(runs, "sweep", lambda *args, **kwargs: (controls, []))
    monkeypatch.setattr(runs, "Engine", BasePasses)
    monkeypatch.setattr(runs, "gpu_count", lambda: 2)
    catalog = load_catalog(Path(__file__).parents[4] / "catalogs/afdep.toml")
    report = runs.run_review([], catalog, tmp_path, tmp_path, "B", tmp_path / "w", slots=4)
    assert [failure.config for failure in report.change_fails] == ["bf16-eager"]
    assert seen_slots == [4]  # BASE's controls run as many at a time as the change's
    assert report.harness_broken == [
        "the harness is broken: the forced-fail control was not killed: SURVIVED: SURVIVED here "
        "(config bf16-graph)"
    ]


def test_a_change_reviewed_from_another_checkout_brings_its_own_catalog(repo, capsys):
    """A change that renames a site renames it in its catalog too: the review
    of BASE..CHANGE from a checkout of BASE reads the catalog as CHANGE has it."""
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "renamed")
    for name in ("main.cpp", "catalog.toml"):
        path = repo / SRC / name
        path.write_text(path.read_text().replace("fx.consumer.flag_wait", "fx.consumer.flag_poll"))
    git(repo, "commit", "-qam", "rename the wait site")
    git(repo, "checkout", "-q", base)  # the working tree (and its catalog) say flag_wait
    status = main([base, "renamed", "--root", str(repo), "--no-generated"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "- `fx.consumer.flag_poll` (wait, tests/fixtures/flag_payload/main.cpp:48-" in out


def test_an_older_tree_its_own_catalog_refuses_is_judged_by_the_given_one(repo, capsys):
    """A tree whose own catalog names a site it lacks (as a commit before a
    rename does under today's catalog) is not judged; with --older-trees the
    given catalog judges it, what names the missing site left out and said."""
    base = git(repo, "rev-parse", "HEAD")
    path = repo / SRC / "main.cpp"
    path.write_text(path.read_text().replace("fx.consumer.flag_wait", "fx.consumer.flag_poll"))
    git(repo, "commit", "-qam", "rename the wait site in the source alone")
    catalog = repo / SRC / "catalog.toml"
    assert main([base, "HEAD", "--root", str(repo), "--no-generated"]) == 2
    assert capsys.readouterr().err.endswith(
        "fault S1 patch #0: site: unknown site 'fx.consumer.flag_wait' in "
        f"{repo.parent / 'work' / 'change' / SRC}\n"
    )
    words = [base, "HEAD", "--root", str(repo), "--no-generated", "--older-trees"]
    assert main(words, workdir="work2") == 1  # judged: the renamed site has no fault left
    out = capsys.readouterr().out.splitlines()
    change = repo.parent / "work2" / "change" / SRC
    assert out[4] == (
        f"Judged by `{catalog}`, the tree's own catalog refused ({change / 'catalog.toml'}: "
        f"fault S1 patch #0: site: unknown site 'fx.consumer.flag_wait' in {change}); "
        "left out as naming sites the tree lacks: `S1`, `S2`."
    )
    assert out[-2:] == ["Verdict: CHANGES NEEDED", ""]
