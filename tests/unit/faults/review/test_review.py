"""faults.review.review on synthetic git repositories built from the CPU fixture:
each test asserts on the Review the command built (the data its Markdown and
SARIF render); two check the Markdown itself, whole: the end of
test_run_executes_the_covering_faults_on_head and
test_the_markdown_says_every_part_of_a_review."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest

from faults.judge.run_result import RunResult
import faults.review.review as review_module
from faults.catalog import Config, load_catalog
from faults.judge.verdict import Verdict
from faults.pipeline.engine import CLEAN, FORCED
from faults.review.coverage import Coverage
from faults.review.markdown import markdown
from faults.review.model import (
    GoneSite,
    LostEntry,
    OlderTree,
    Review,
    ReviewVerdict,
    SiteLoss,
)
from faults.review.matrix import ConfigPlan, Firing
from faults.review.progress import Planned, Ran
from faults.review.runs import CleanFailure, RunReport, first_failure
from faults.review.static import ContractCheck
from invariants.sync.finding import Finding
from invariants.sync.sites import Site
from tests.unit.faults.gitrepo import git
from tools.faults_cli.main import main as faults_main

FIXTURE = Path(__file__).parents[4] / "tests/fixtures/flag_payload"
SRC = "tests/fixtures/flag_payload"
MAIN_CPP = f"{SRC}/main.cpp"


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


@contextmanager
def kept_reviews() -> Iterator[list[Review]]:
    """The Review each `afdep-faults review` inside renders, kept as it renders it."""
    kept: list[Review] = []
    render = review_module.markdown

    def keep(result: Review) -> str:
        kept.append(result)
        return render(result)

    with mock.patch.object(review_module, "markdown", keep):
        yield kept


def reviewed(words: list[str], catalog: Path | None = None, workdir: str = "work"):
    """`main(words)`: its exit status and the one Review it built."""
    with kept_reviews() as kept:
        status = main(words, catalog, workdir)
    [result] = kept
    return status, result


def review(repo: Path, *extra: str) -> tuple[int, Review]:
    """The static review of the working tree against HEAD."""
    return reviewed(["HEAD", "--root", str(repo), *extra])


def touched(result: Review) -> list[tuple]:
    """Each touched site: name, kind, path from the tree's root, first and last line."""
    return [
        (c.site.name, c.site.kind, result.site_path(c), c.site.start, c.site.end)
        for c in result.touched
    ]


def covers(result: Review) -> list[tuple]:
    """Each touched site's name, must-pass and must-fail faults, and what it lacks."""
    return [(c.site.name, c.passing, c.failing, c.missing) for c in result.touched]


def runs(results: list[RunResult]) -> list[tuple]:
    return [(r.fault, r.config, r.verdict, r.ok) for r in results]


def test_clean_diff_passes(repo):
    status, result = review(repo)
    assert status == 0
    assert (result.touched, result.unsited, result.verdict) == ([], [], ReviewVerdict.OK)


def test_release_added_outside_a_site_is_flagged(repo):
    edit(
        repo,
        "int mismatches = 0;\n",
        "int mismatches = 0;\n  channel.flag.store(7, std::memory_order_release);\n",
    )
    status, result = review(repo)
    assert status == 1
    assert result.unsited == [Finding(MAIN_CPP, 52, "ordering primitive store( outside any site")]
    assert result.verdict is ReviewVerdict.CHANGES_NEEDED


def test_new_site_with_no_fault_is_flagged(repo):
    edit(
        repo,
        "  int mismatches = 0;\n",
        "  int mismatches = 0;\n  // @site fx.consumer.tally kind=compute\n"
        "  mismatches += 0;\n  // @end fx.consumer.tally\n",
    )
    status, result = review(repo, "--no-generated")
    assert status == 1
    assert touched(result) == [("fx.consumer.tally", "compute", MAIN_CPP, 52, 54)]
    assert covers(result) == [("fx.consumer.tally", [], [], ["no must-pass fault delays it"])]
    assert result.verdict is ReviewVerdict.CHANGES_NEEDED
    status, result = review(repo)  # generated faults cover it
    assert status == 0
    assert covers(result) == [("fx.consumer.tally", ["gen.delay.fx.consumer.tally"], [], [])]
    assert result.verdict is ReviewVerdict.OK


def test_change_inside_a_covered_site_lists_its_faults(repo):
    edit(
        repo,
        "for (int word_idx = 0; word_idx < kWords; ++word_idx) channel.payload",
        "for (int word_idx = 0; word_idx != kWords; ++word_idx) channel.payload",
    )
    status, result = review(repo)
    assert status == 0
    assert touched(result) == [("fx.producer.payload_store", "store", MAIN_CPP, 36, 38)]
    assert covers(result) == [
        (
            "fx.producer.payload_store",
            ["D1", "gen.delay.fx.producer.payload_store"],
            ["S1", "gen.skip.fx.consumer.flag_wait"],
            [],
        )
    ]
    assert result.verdict is ReviewVerdict.OK


FLAG_WAIT_FAULTS = ["D1", "gen.delay.fx.producer.payload_store", "S1", "S2",
                    "gen.skip.fx.consumer.flag_wait"]  # fmt: skip
FLAG_WAIT_RAN = [
    ("D1", "default", Verdict.PASSED, True),
    ("gen.delay.fx.producer.payload_store", "default", Verdict.PASSED, True),
    ("S1", "default", Verdict.KILLED, True),
    ("S2", "default", Verdict.SURVIVED, True),
    ("gen.skip.fx.consumer.flag_wait", "default", Verdict.KILLED, True),
]


def test_run_executes_the_covering_faults_on_head(repo, capsys, monkeypatch, progress):
    """The Review of `review --run`, what it told its progress as it went,
    then the Markdown renderer end to end: what it prints, every line (the
    static contract by test_static's stand-in)."""
    from tests.unit.faults.review.test_static import install_contract

    install_contract(monkeypatch)
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    git(repo, "commit", "-qam", "head")
    status, result = reviewed(["HEAD~1", "HEAD", "--root", str(repo), "--run"], workdir="w")
    assert status == 0
    assert (result.base, result.change) == ("HEAD~1", "HEAD")
    assert touched(result) == [("fx.consumer.flag_wait", "wait", MAIN_CPP, 48, 50)]
    assert runs(result.runs.controls) == [
        (CLEAN, "default", Verdict.PASSED, True),
        (FORCED, "default", Verdict.KILLED, True),
    ]
    assert covers(result) == [
        (
            "fx.consumer.flag_wait",
            ["D1", "gen.delay.fx.producer.payload_store"],
            ["S1", "S2", "gen.skip.fx.consumer.flag_wait"],
            [],
        )
    ]
    assert runs(result.runs.faults) == FLAG_WAIT_RAN  # its covering faults, each judged
    # the change passes with no fault: BASE's tree is not run
    assert result.runs.change_fails == result.runs.harness_broken == result.runs.base_clean == []
    assert result.contract == ContractCheck(True, [], 4, 1)
    assert result.verdict is ReviewVerdict.OK
    # the clean run's probes: the touched wait fires under the fixture's one config
    wait = "fx.consumer.flag_wait"
    assert result.runs.firing == {wait: Firing(wait, ["default"])}
    assert (result.runs.plan.run, result.runs.plan.not_run) == ([Config("default")], {})
    every = "the change's tree, clean then with the forced failure, under every config here"
    faults = "the covering faults, each where its sites fire: " + ", ".join(FLAG_WAIT_FAULTS)
    assert progress == [
        Planned(f"{every}: default", 2, 2, 0),
        Ran("change", CLEAN, "default", Verdict.PASSED, 1, 2),
        Ran("change", FORCED, "default", Verdict.KILLED, 2, 2),
        Planned(faults, 5, 7, 2),
        # the shared phase, then the must-fail faults under a delay, alone
        Ran("change", "D1", "default", Verdict.PASSED, 3, 7),
        Ran("change", "gen.delay.fx.producer.payload_store", "default", Verdict.PASSED, 4, 7),
        Ran("change", "S2", "default", Verdict.SURVIVED, 5, 7),
        Ran("change", "S1", "default", Verdict.KILLED, 6, 7),
        Ran("change", "gen.skip.fx.consumer.flag_wait", "default", Verdict.KILLED, 7, 7),
    ]
    assert capsys.readouterr().out.splitlines() == [
        "# Ordering review: HEAD~1..HEAD",
        "",
        "Files changed under the sources: `main.cpp`",
        "",
        "## The change's own run",
        "",
        "- The change's tree passes the driver with no fault (config default).",
        "- BASE's tree: not run (the change's tree passes: nothing to tell apart).",
        "- The matrix: the catalog's configs; run here: default.",
        "",
        "## Static contract (the changed tree, no GPU)",
        "",
        "4 sites, 1 kernel variants checked: no violation.",
        "",
        "## Sites touched",
        "",
        f"- `fx.consumer.flag_wait` (wait, {MAIN_CPP}:48-50): covered",
        "  - contract: ok",
        "  - must pass: D1, gen.delay.fx.producer.payload_store",
        "  - must fail: S1, S2, gen.skip.fx.consumer.flag_wait",
        "  - ran: D1 [default] PASSED, gen.delay.fx.producer.payload_store [default] PASSED, "
        "S1 [default] KILLED, S2 [default] SURVIVED, gen.skip.fx.consumer.flag_wait [default] "
        "KILLED",
        "  - fires under: default",
        "",
        "## Runs on the change's tree (controls first)",
        "",
        "- control.clean [default]: PASSED",
        "- control.forced_fail [default]: KILLED",
        "- D1 [default]: PASSED",
        "- gen.delay.fx.producer.payload_store [default]: PASSED",
        "- S1 [default]: KILLED",
        "- S2 [default]: SURVIVED",
        "- gen.skip.fx.consumer.flag_wait [default]: KILLED",
        "",
        f"Wall time: {result.wall_s:.1f} s",
        "",
        "Verdict: ok",
        "",
    ]
    assert 0 < result.wall_s < 600


def test_run_judges_no_fault_when_a_control_is_wrong(repo, capsys):
    catalog = repo / SRC / "catalog.toml"
    catalog.write_text(catalog.read_text().replace("+ (word_idx == 3);", ";"))
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    git(repo, "commit", "-qam", "head: a forced failure that fails nothing")
    words = ["HEAD~1", "HEAD", "--root", str(repo), "--run"]
    words += ["--report", str(repo.parent / "r.md"), "--sarif", str(repo.parent / "r.sarif")]
    status, result = reviewed(words, catalog, workdir="w")
    out = capsys.readouterr().out
    assert status == 1
    assert runs(result.runs.controls) == [
        (CLEAN, "default", Verdict.PASSED, True),
        (FORCED, "default", Verdict.SURVIVED, False),
    ]
    assert result.runs.harness_broken == [
        "the harness is broken: the forced-fail control was not killed: SURVIVED: the forced "
        "failure was not detected: the harness cannot see a failure, so no fault can be judged "
        "(config default)"
    ]
    assert (result.runs.faults, result.runs.change_fails) == ([], [])  # no fault judged
    assert result.verdict is ReviewVerdict.HARNESS_BROKEN
    [found] = json.loads((repo.parent / "r.sarif").read_text())["runs"][0]["results"]
    assert (found["ruleId"], found["level"]) == ("harness-broken", "warning")
    assert found["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": f"{SRC}/catalog.toml", "uriBaseId": "%SRCROOT%"}
            }
        }
    ]
    assert (repo.parent / "r.md").read_text() == out[:-1]  # --report: what it prints


def test_a_pure_deletion_inside_a_site_touches_it(repo):
    edit(repo, "  channel.flag.store(round_idx + 1, std::memory_order_release);\n", "")
    _, result = review(repo)  # its verdict is the publish contract's to give
    assert touched(result) == [("fx.producer.flag_release", "release", MAIN_CPP, 39, 40)]


ONE_WORD_OFF = "const int got = channel.payload[word_idx] + (word_idx == 5);"
MISMATCH = "Mismatched payload round=0 word=5 expected=6 got=7"


def test_a_change_that_fails_with_no_fault_is_named_not_the_harness(repo):
    edit(repo, "const int got = channel.payload[word_idx];", ONE_WORD_OFF)
    git(repo, "commit", "-qam", "head: the check reads one word wrong")
    status, result = reviewed(["HEAD~1", "HEAD", "--root", str(repo), "--run"], workdir="w")
    log = repo.parent / "w/runs/change/control.clean/control.clean-default.log"
    assert result.runs.change_fails == [CleanFailure("default", MISMATCH, str(log))]
    assert runs(result.runs.base_clean) == [(CLEAN, "default", Verdict.PASSED, True)]
    [clean] = result.runs.controls  # no forced failure on a tree that fails alone
    assert (clean.fault, clean.config, clean.verdict, clean.ok, clean.reason) == (
        CLEAN,
        "default",
        Verdict.BROKE,
        False,
        f"the change fails the driver: {MISMATCH}",
    )
    assert result.runs.harness_broken == []  # the change is blamed, not the harness
    assert touched(result) == [("fx.consumer.check", "compute", MAIN_CPP, 52, 59)]
    assert result.runs.faults == []  # a control was wrong: no fault judged
    assert status == 1 and result.verdict is ReviewVerdict.CHANGES_NEEDED


def test_base_failing_with_no_fault_too_is_a_broken_harness(repo):
    edit(repo, "const int got = channel.payload[word_idx];", ONE_WORD_OFF)
    git(repo, "commit", "-qam", "base: the check reads one word wrong")
    edit(repo, "  if (!fixture::wait_until(", "  if (!::fixture::wait_until(")
    git(repo, "commit", "-qam", "head: an ordering-neutral change")
    status, result = reviewed(["HEAD~1", "HEAD", "--root", str(repo), "--run"], workdir="w")
    log = repo.parent / "w/runs/base/control.clean/control.clean-default.log"
    assert result.runs.harness_broken == [
        "the harness is broken: BASE's tree fails the driver too, with no fault: "
        f"{MISMATCH} (config default; log: {log})"
    ]
    assert runs(result.runs.base_clean) == [(CLEAN, "default", Verdict.BROKE, False)]
    assert result.runs.change_fails == []  # the change is not blamed
    [clean] = result.runs.controls
    assert (clean.fault, clean.config, clean.verdict, clean.ok, clean.reason) == (
        CLEAN,
        "default",
        Verdict.BROKE,
        False,
        "BASE's tree fails too: the harness is broken",
    )
    assert status == 1 and result.verdict is ReviewVerdict.HARNESS_BROKEN


def site(name: str, kind: str, start: int, end: int, guards: str | None = None) -> Site:
    return Site(name, kind, guards, Path("/t/src/k.cu"), start, end)


def test_the_markdown_says_every_part_of_a_review():
    """The Markdown renderer on a Review made by hand: an older tree, a
    primitive outside any site, each touched site's contract (violated, held,
    none), an uncovered site, a violation elsewhere, a change failing under
    one config and a blind harness under another, a config not run here,
    where two sites fire (one under no config), a fault placed nowhere, and
    the review's wall time; every line."""
    payload = site("k.payload", "store", 3, 5)
    release = site("k.release", "release", 6, 8, guards="k.payload")
    wait = site("k.wait", "wait", 10, 12, guards="k.payload")
    tally = site("k.tally", "compute", 14, 16)
    violated = Finding("src/k.cu", 7, "no release order", "k.release")
    elsewhere = Finding("src/k.cu", 20, "no ld.acquire", "k.other", "sm90")

    def ran(fault: str, config: str, verdict: Verdict, ok: bool, reason: str = "") -> RunResult:
        return RunResult(fault, config, 0, verdict, ok, reason, "0" * 64)

    failure = CleanFailure("eager", "Mismatched word=5", "/w/eager.log")
    result = Review(
        base="main",
        change="topic",
        tree=Path("/t"),
        sources="src",
        changed={"k.cu": {4, 7, 11, 15, 18}, "a.h": set()},
        touched=[
            Coverage(payload, guarded=True, passing=["D1"], failing=["S1"]),
            Coverage(release, passing=["D2"], failing=["S2"]),
            Coverage(wait, passing=["D1"], failing=["S3"]),
            Coverage(tally),
        ],
        unsited=[Finding("src/k.cu", 18, "ordering primitive store( outside any site")],
        contract=ContractCheck(True, [violated, elsewhere], 4, 2),
        runs=RunReport(
            controls=[
                ran(CLEAN, "eager", Verdict.BROKE, False, "the change fails the driver: X"),
                ran(FORCED, "eager", Verdict.TIMED_OUT, False, "hangs"),
                ran(CLEAN, "graph", Verdict.PASSED, True),
                ran(FORCED, "graph", Verdict.SURVIVED, False, "not detected"),
            ],
            faults=[],
            change_fails=[failure],
            harness_broken=["the harness is broken: blind (config graph)"],
            base_clean=[ran(CLEAN, "eager", Verdict.PASSED, True)],
            plan=ConfigPlan([], {"4gpu": "needs 4 GPUs, 2 here"}),
            firing={
                "k.wait": Firing("k.wait", ["graph"], [], ["eager"]),
                "k.tally": Firing("k.tally", [], ["graph"]),
            },
            unplaced=["S3"],
            unrun={"k.wait": ["no must-fail fault ran: S3 (their sites fire together under "
                              "no config here)"]},  # fmt: skip
        ),
        older=OlderTree("catalogs/x.toml", "unknown site 'k.gone'", ["S9"]),
        lost=[LostEntry("N4", ("k.gone",)), LostEntry("target.mutation #0 (weaken)", ())],
        gone=[
            GoneSite("k.gone", "src/k.cu", 30, SiteLoss.GONE),
            GoneSite("k.open", "src/k.cu", 40, SiteLoss.BROKEN),
            GoneSite("k.typo", None, None, SiteLoss.GONE),
        ],
        wall_s=12.34,
    )
    assert markdown(result).splitlines() == [
        "# Ordering review: main..topic",
        "",
        "Files changed under the sources: `a.h`, `k.cu`",
        "",
        "Judged by `catalogs/x.toml`, the tree's own catalog refused (unknown site 'k.gone'); "
        "left out as naming sites the tree lacks: `S9`.",
        "",
        "## The change's own run",
        "",
        "- **the change fails the driver: Mismatched word=5 (config eager; log: /w/eager.log)**",
        "- **the harness is broken: blind (config graph)**",
        "- BASE's tree with no fault [eager]: PASSED",
        "- The matrix: the catalog's configs; run here: none.",
        "- Configs not run here: 4gpu (needs 4 GPUs, 2 here).",
        "",
        "## Static contract (the changed tree, no GPU)",
        "",
        "4 sites, 2 kernel variants checked: 2 violation(s).",
        "",
        "## Site rules the change breaks (primitives outside any site, open regions)",
        "",
        "- src/k.cu:18: ordering primitive store( outside any site",
        "",
        "## Sites the change removed, renamed or left unbalanced",
        "",
        "- `k.gone` (at BASE src/k.cu:30): gone from the change's tree "
        "(its `// @site` lines or its anchor removed or renamed)",
        "- `k.open` (at BASE src/k.cu:40): broken in the change's tree "
        "(a site-rule finding names it)",
        "- `k.typo` (not in BASE either): gone from the change's tree "
        "(its `// @site` lines or its anchor removed or renamed)",
        "",
        "## Catalog entries that no longer apply (their site is gone)",
        "",
        "- `N4` (names `k.gone`)",
        "- `target.mutation #0 (weaken)`",
        "",
        "## Sites touched",
        "",
        "- `k.payload` (store, src/k.cu:3-5): covered",
        "  - contract: none (a store site declares no publish contract)",
        "  - must pass: D1",
        "  - must fail: S1",
        "  - ran: none (a control was wrong: no fault judged)",
        "- `k.release` (release, src/k.cu:6-8): covered",
        "  - contract: VIOLATED: src/k.cu:7: k.release: no release order",
        "  - must pass: D2",
        "  - must fail: S2",
        "  - ran: none (a control was wrong: no fault judged)",
        "- `k.wait` (wait, src/k.cu:10-12): covered",
        "  - contract: ok",
        "  - must pass: D1",
        "  - must fail: S3",
        "  - ran: none (a control was wrong: no fault judged)",
        "  - fires under: graph; not known under: eager (the clean run failed)",
        "  - not run: S3 (their sites fire together under no config here)",
        "  - NOT COVERED BY A RUN: no must-fail fault ran: S3 (their sites fire together under "
        "no config here)",
        "- `k.tally` (compute, src/k.cu:14-16): UNCOVERED: no must-pass fault delays it",
        "  - contract: none (a compute site declares no publish contract)",
        "  - must pass: -",
        "  - must fail: n/a (no wait guards it)",
        "  - ran: none (a control was wrong: no fault judged)",
        "  - fires under: none; never under: graph (no run covers it)",
        "",
        "## Contract violations at sites the change does not touch",
        "",
        "- src/k.cu:20: k.other [sm90]: no ld.acquire",
        "",
        "## Runs on the change's tree (controls first)",
        "",
        "- control.clean [eager]: BROKE (the change fails the driver: X)",
        "- control.forced_fail [eager]: TIMED OUT (hangs)",
        "- control.clean [graph]: PASSED",
        "- control.forced_fail [graph]: SURVIVED (not detected)",
        "",
        "Wall time: 12.3 s",
        "",
        "Verdict: CHANGES NEEDED",
    ]


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


def test_a_change_reviewed_from_another_checkout_brings_its_own_catalog(repo):
    """A change that renames a site renames it in its catalog too: the review
    of BASE..CHANGE from a checkout of BASE reads the catalog as CHANGE has it."""
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "renamed")
    for name in ("main.cpp", "catalog.toml"):
        path = repo / SRC / name
        path.write_text(path.read_text().replace("fx.consumer.flag_wait", "fx.consumer.flag_poll"))
    git(repo, "commit", "-qam", "rename the wait site")
    git(repo, "checkout", "-q", base)  # the working tree (and its catalog) say flag_wait
    status, result = reviewed([base, "renamed", "--root", str(repo), "--no-generated"])
    assert status == 0, markdown(result)
    assert touched(result) == [("fx.consumer.flag_poll", "wait", MAIN_CPP, 48, 50)]
    assert covers(result) == [("fx.consumer.flag_poll", ["D1"], ["S1", "S2"], [])]


def test_dropped_annotations_are_findings_of_the_change(repo):
    """A change that deletes a site's `// @site` and `// @end` lines: the
    primitive it held is now outside every site, and the catalog's fault of
    that site no longer applies; both are findings, not a catalog error."""
    path = repo / SRC / "main.cpp"
    kept = [
        line
        for line in path.read_text().splitlines()
        if "@site fx.producer.flag_release" not in line
        and "@end fx.producer.flag_release" not in line
    ]
    path.write_text("\n".join(kept) + "\n")
    status, result = review(repo)
    assert (status, result.verdict) == (1, ReviewVerdict.CHANGES_NEEDED)
    assert result.unsited == [Finding(MAIN_CPP, 39, "ordering primitive store( outside any site")]
    assert result.lost == [LostEntry("N1", ("fx.producer.flag_release",))]
    assert result.gone == [GoneSite("fx.producer.flag_release", MAIN_CPP, 39, SiteLoss.GONE)]


def test_a_catalog_malformed_otherwise_is_still_the_users_error(repo, capsys):
    path = repo / SRC / "main.cpp"
    path.write_text(path.read_text().replace("fx.consumer.flag_wait", "fx.consumer.flag_poll"))
    catalog = repo / SRC / "catalog.toml"
    catalog.write_text(catalog.read_text() + "\n[bogus]\n")
    assert main(["HEAD", "--root", str(repo)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "bogus" in line


def test_an_older_tree_its_own_catalog_refuses_is_judged_by_the_given_one(repo, capsys):
    """A tree whose own catalog names a site it lacks (as a commit before a
    rename does under today's catalog) is not judged; with --older-trees the
    given catalog judges it, what names the missing site left out and said."""
    base = git(repo, "rev-parse", "HEAD")
    path = repo / SRC / "main.cpp"
    path.write_text(path.read_text().replace("fx.consumer.flag_wait", "fx.consumer.flag_poll"))
    git(repo, "commit", "-qam", "rename the wait site in the source alone")
    catalog = repo / SRC / "catalog.toml"
    status, own = reviewed([base, "HEAD", "--root", str(repo), "--no-generated"])
    assert (status, own.lost, own.older, own.verdict) == (
        1,
        [LostEntry("S1", ("fx.consumer.flag_wait",)), LostEntry("S2", ("fx.consumer.flag_wait",))],
        None,
        ReviewVerdict.CHANGES_NEEDED,
    )  # judged by its own catalog: the faults of the renamed site no longer apply
    words = [base, "HEAD", "--root", str(repo), "--no-generated", "--older-trees"]
    status, result = reviewed(words, workdir="work2")
    assert status == 1  # judged: the renamed site has no fault left
    change = repo.parent / "work2" / "change" / SRC
    assert result.older == OlderTree(
        str(catalog),
        f"{change / 'catalog.toml'}: fault S1 patch #0: site: unknown site "
        f"'fx.consumer.flag_wait' in {change}",
        ["S1", "S2"],
    )
    assert result.verdict is ReviewVerdict.CHANGES_NEEDED
