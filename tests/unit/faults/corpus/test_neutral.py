"""faults.corpus.neutral: real commits of a range reviewed statically on a clone, each
expected approved unless the expectations file says it changes the ordering;
the document and its one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from faults.corpus.neutral import (
    Commit,
    CommitResult,
    Expect,
    Expectation,
    NeutralError,
    ReviewAnswer,
    commits_in,
    expectation_for,
    load_expectations,
    sarif_run,
)
from faults.corpus.neutral_report import document, markdown, merged, write_results
from tests.unit.faults.gitrepo import git
from tools.faults_cli.main import main as faults_main

FIXTURE = Path(__file__).parents[4] / "tests/fixtures/flag_payload"
SRC = "tests/fixtures/flag_payload"
PYPROJECT = f'[tool.faults]\ncatalogs = ["{SRC}/catalog.toml"]\n'
RELEASE = "  channel.flag.store(7, std::memory_order_release);\n"


def commit_edit(repo: Path, subject: str, old: str, new: str, name: str = "main.cpp") -> str:
    path = repo / SRC / name
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    git(repo, "commit", "-qam", subject)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path) -> tuple[Path, dict[str, str]]:
    """The CPU fixture's repository and four commits after its first: one
    outside the sources, one neutral, two that add a release outside a site."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo / SRC)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    (repo / "README.md").write_text("the fixture\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "docs: a README")
    shas = {"docs": git(repo, "rev-parse", "HEAD")}
    shas["neutral"] = commit_edit(
        repo, "check: print eight mismatches", "mismatches++ < 4", "mismatches++ < 8"
    )
    shas["expected"] = commit_edit(
        repo,
        "consume: a release before the check",
        "  int mismatches = 0;\n",
        "  int mismatches = 0;\n" + RELEASE,
    )
    shas["unexpected"] = commit_edit(
        repo,
        "consume: a release after the sleep",
        "  std::this_thread::sleep_for(kConsumerWork);\n",
        "  std::this_thread::sleep_for(kConsumerWork);\n" + RELEASE,
    )
    return repo, shas


def expectations_file(folder: Path, sha: str) -> Path:
    path = folder / "neutral.toml"
    path.write_text(
        f'[[commit]]\nsha = "{sha[:10]}"\nexpect = "changes-needed"\n'
        'why = "a release before the check"\n'
    )
    return path


def run_neutral(repo: Path, tmp_path: Path, *words: str) -> int:
    top = ["--root", str(repo), "--workdir", str(tmp_path / "work")]
    results = ["--results-dir", str(tmp_path / "results")]
    return faults_main([*top, "corpus", "--neutral", *words, *results])


def test_neutral_commits_approved_ordering_ones_flagged_as_expected_or_reported(
    history, tmp_path, capsys
):
    repo, shas = history
    expect = expectations_file(tmp_path, shas["expected"])
    assert run_neutral(repo, tmp_path, "HEAD", "--expect", str(expect)) == 1  # a false positive
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith(
        "3 commits change the sources: 1 approved, 2 flagged, 0 not judged; "
        f"false positives: 1 ({shas['unexpected'][:8]}); static review max "
    )
    doc = json.loads((tmp_path / "results/review-neutral-cpu.json").read_text())
    rows = [
        (row["sha"], row["verdict"], row["expected"], row["false_positive"], row["sites_touched"])
        for row in doc["results"]
    ]
    assert rows == [
        (shas["neutral"], "ok", "ok", False, ["fx.consumer.check"]),
        (shas["expected"], "CHANGES NEEDED", "changes-needed", False, []),
        (shas["unexpected"], "CHANGES NEEDED", "ok", True, []),
    ]
    assert doc["results"][1]["why"] == "a release before the check"
    assert doc["results"][2]["findings"] == [
        "primitive-outside-site: ordering primitive store( outside any site"
    ]
    assert doc["false_positives"] == [shas["unexpected"]]
    assert (doc["commits_reviewed"], doc["as_expected"], doc["not_under_sources"]) == (3, 2, 1)
    assert doc["outside_sources"] == [{"sha": shas["docs"], "subject": "docs: a README"}]
    assert doc["ranges"] == ["HEAD"] and doc["expectations"] == str(expect)
    assert all(0 < row["seconds"] < 120 for row in doc["results"])
    assert git(repo, "status", "--porcelain") == ""  # the user's tree untouched


def test_a_range_of_neutral_commits_passes(history, tmp_path):
    repo, shas = history
    assert run_neutral(repo, tmp_path, f"{shas['docs']}..{shas['neutral']}") == 0
    doc = json.loads((tmp_path / "results/review-neutral-cpu.json").read_text())
    counts = ("commits_reviewed", "approved", "flagged", "not_judged", "false_positives")
    assert [doc[key] for key in counts] == [1, 1, 0, 0, []]
    assert [(row["sha"], row["verdict"]) for row in doc["results"]] == [(shas["neutral"], "ok")]


@pytest.mark.parametrize(
    ("rev_range", "message"),
    [
        ("nope", "--neutral 'nope': no revision or range git knows"),
        ("HEAD..nope", "--neutral 'HEAD..nope': no revision or range git knows"),
        ("--all", "--neutral '--all': no revision or range git knows"),
        ("HEAD..HEAD", "--neutral 'HEAD..HEAD': no commit with a parent in the range"),
        ("HEAD~4", "--neutral 'HEAD~4': no commit with a parent in the range"),  # the root alone
    ],
)
def test_a_range_git_does_not_know_or_that_is_empty_is_one_line(history, rev_range, message):
    repo, _ = history
    with pytest.raises(NeutralError) as error:
        commits_in(repo, rev_range, SRC)
    assert str(error.value) == message


def test_a_bad_ref_stops_the_command_before_any_review(history, tmp_path, capsys):
    repo, _ = history
    assert run_neutral(repo, tmp_path, "main..nope") == 2
    assert capsys.readouterr().err == (
        "python -m faults: error: --neutral 'main..nope': no revision or range git knows\n"
    )
    assert list((tmp_path / "work").iterdir()) == []


def test_commits_split_by_the_sources_and_a_merge_is_its_first_parents_change(history):
    repo, shas = history
    base = git(repo, "rev-parse", "HEAD~4")
    git(repo, "checkout", "-qb", "side", shas["docs"])
    (repo / "NOTES.md").write_text("notes\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-qm", "notes")
    git(repo, "checkout", "-q", "-")
    git(repo, "merge", "-q", "--no-edit", "side")
    under, outside = commits_in(repo, f"{shas['neutral']}..HEAD", SRC)
    assert [c.sha for c in under] == [shas["expected"], shas["unexpected"]]
    assert [(c.subject, c.merge) for c in outside] == [
        ("notes", False),
        ("Merge branch 'side'", True),
    ]
    assert outside[1].parent == shas["unexpected"]
    every, _ = commits_in(repo, "HEAD", SRC)
    assert base not in [c.sha for c in every]  # the root has no parent to review against


def result(sha: str, outcome: ReviewAnswer, expected: Expect, *sites: str) -> CommitResult:
    commit = Commit(sha, "f" * 40, f"subject of {sha[:2]}")
    reviewed = CommitResult(
        commit, outcome, expected, "moves a wait" * (expected is not Expect.OK), 2.5
    )
    reviewed.cpu_seconds, reviewed.load, reviewed.sites_touched = 1.25, 0.5, list(sites)
    return reviewed


def test_false_positive_and_as_expected():
    assert result("a" * 40, ReviewAnswer.CHANGES_NEEDED, Expect.OK).false_positive is True
    assert result("a" * 40, ReviewAnswer.CHANGES_NEEDED, Expect.CHANGES_NEEDED).false_positive is False
    assert result("a" * 40, ReviewAnswer.OK, Expect.CHANGES_NEEDED).as_expected is False
    unjudged = result("a" * 40, ReviewAnswer.NOT_JUDGED, Expect.OK)
    assert (unjudged.false_positive, unjudged.as_expected) == (False, False)


def make_doc(results: list[CommitResult], digest: str = "ab" * 32, rev_range: str = "HEAD") -> dict:
    outside = [Commit("c" * 40, "d" * 40, "docs")]
    return document(
        results,
        outside,
        machine="cpu",
        digest=digest,
        sources="src",
        rev_range=rev_range,
        expectations="neutral.toml",
    )


def test_the_document_and_its_table():
    doc = make_doc(
        [
            result("a" * 40, ReviewAnswer.OK, Expect.OK, "k.p", "k.q"),
            result("b" * 40, ReviewAnswer.CHANGES_NEEDED, Expect.CHANGES_NEEDED, *"vwxyz"),
            result("e" * 40, ReviewAnswer.NOT_JUDGED, Expect.OK),
        ]
    )
    doc["results"][2]["seconds"] = 12.0
    doc = merged({}, doc) | {"max_seconds": 12.0, "within_budget": False}
    assert (doc["approved"], doc["flagged"], doc["not_judged"], doc["as_expected"]) == (1, 1, 1, 2)
    assert (doc["median_seconds"], doc["false_positives"], doc["not_under_sources"]) == (2.5, [], 1)
    lines = markdown(doc).splitlines()
    assert lines[4] == (
        "3 commits change the sources: 1 approved, 1 flagged, 1 not judged; false positives: 0 "
        "(none); static review max 12.0 s, median 2.5 s (OVER the 10 s budget; CPU max "
        "1.25 s, median 1.25 s)."
    )
    assert (
        lines[8]
        == "| `aaaaaaaa` | subject of aa | ok | ok | no | `k.p`, `k.q` | 2.5 | 1.25 | 0.5 |"
    )
    assert lines[9] == (
        "| `bbbbbbbb` | subject of bb | CHANGES NEEDED | changes-needed | no "
        "| `v`, `w`, `x`, `y` and 1 more | 2.5 | 1.25 | 0.5 |"
    )
    assert lines[-1] == (
        "1 commits change nothing under `src` (the review has nothing to judge): `cccccccc`."
    )


def test_a_second_range_merges_into_the_document(tmp_path):
    first = make_doc([result("a" * 40, ReviewAnswer.CHANGES_NEEDED, Expect.OK)])
    write_results(first, tmp_path)
    again = make_doc(
        [
            result("a" * 40, ReviewAnswer.OK, Expect.OK),  # reviewed again: its row replaces the first
            result("b" * 40, ReviewAnswer.OK, Expect.OK),
        ],
        rev_range="main..topic",
    )
    stem = write_results(again, tmp_path)
    doc = json.loads(stem.with_suffix(".json").read_text())
    assert stem.name == "review-neutral-cpu"
    assert [(row["sha"][0], row["verdict"]) for row in doc["results"]] == [("a", "ok"), ("b", "ok")]
    assert (doc["ranges"], doc["false_positives"], doc["commits_reviewed"]) == (
        ["HEAD", "main..topic"],
        [],
        2,
    )
    other = make_doc([result("e" * 40, ReviewAnswer.OK, Expect.OK)], digest="cd" * 32)
    alone = json.loads(write_results(other, tmp_path).with_suffix(".json").read_text())
    assert [row["sha"][0] for row in alone["results"]] == ["e"]  # another source starts anew


def test_expectations_match_a_sha_prefix(tmp_path):
    path = tmp_path / "neutral.toml"
    path.write_text(
        '[[commit]]\nsha = "abcdef1"\nexpect = "changes-needed"\nwhy = " moves a wait "\n'
    )
    [entry] = load_expectations(path)
    assert entry == Expectation("abcdef1", Expect.CHANGES_NEEDED, "moves a wait")
    assert expectation_for("abcdef1" + "0" * 33, [entry]) is entry
    assert expectation_for("abcdef2" + "0" * 33, [entry]) == Expectation(
        "abcdef2" + "0" * 33, Expect.OK, ""
    )
    assert load_expectations(None) == []


ENTRY = 'sha = "abcdef1"\nexpect = "changes-needed"\nwhy = "moves a wait"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[commit]]\nsha = 'abcdef1'\n", "commit 1: lacks expect, why (sha, expect, why)"),
        (
            "[[commit]]\n" + ENTRY + "colour = 1\n",
            "commit 1: has unknown colour (sha, expect, why)",
        ),
        (
            "[[commit]]\n" + ENTRY.replace("abcdef1", "abc"),
            "commit 1: sha 'abc' is not 7 to 40 lowercase hex digits",
        ),
        (
            "[[commit]]\n" + ENTRY.replace("changes-needed", "maybe"),
            "commit 1: expect 'maybe' is not one of ['ok', 'changes-needed']",
        ),
        (
            "[[commit]]\n" + ENTRY.replace("moves a wait", " "),
            "commit 1: why must say what the commit does to the ordering",
        ),
        (
            "[[commit]]\n" + ENTRY + "[[commit]]\n" + ENTRY.replace("abcdef1", "abcdef12"),
            "commit 2: abcdef12 is listed twice",
        ),
        ("[bug]\nname = 1\n", "unknown bug; it holds [[commit]] tables"),
        ("commit = 3\n", "commit must be [[commit]] tables"),
        ("[[commit]\n", "Expected ']]' at the end of an array declaration (at line 1, column 9)"),
    ],
)
def test_a_bad_expectations_file_is_one_line_naming_it(tmp_path, text, message):
    path = tmp_path / "neutral.toml"
    path.write_text(text)
    with pytest.raises(NeutralError) as error:
        load_expectations(path)
    assert str(error.value) == f"{path}: {message}"


def test_a_missing_expectations_file_is_named(tmp_path):
    with pytest.raises(NeutralError) as error:
        load_expectations(tmp_path / "absent.toml")
    assert str(error.value) == f"{tmp_path / 'absent.toml'}: cannot be read (FileNotFoundError)"


def test_the_sarif_gives_the_touched_sites_and_the_findings(tmp_path):
    sarif = tmp_path / "r.sarif"
    run = {
        "properties": {"sitesTouched": ["k.p"]},
        "results": [{"ruleId": "contract-violation", "message": {"text": "k.p: no fence"}}],
    }
    sarif.write_text(json.dumps({"version": "2.1.0", "runs": [run]}))
    assert sarif_run(sarif) == (["k.p"], ["contract-violation: k.p: no fence"])
    assert sarif_run(tmp_path / "absent.sarif") == ([], [])


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["corpus"], "corpus: give DIR (a folder of bug patches) or --neutral REV_RANGE"),
        (["corpus", "bugs", "--neutral", "HEAD"], "corpus: DIR or --neutral REV_RANGE, not both"),
        (["corpus", "bugs", "--expect", "x.toml"], "corpus --expect: only with --neutral"),
        (
            ["corpus", "--neutral", "HEAD", "--run"],
            "corpus --neutral: the review is static; --run and --only are DIR's",
        ),
    ],
)
def test_corpus_takes_dir_or_neutral(tmp_path, capsys, words, message):
    shutil.copytree(FIXTURE, tmp_path / SRC)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    assert faults_main(["--root", str(tmp_path), *words]) == 2
    assert capsys.readouterr().err == f"python -m faults: error: {message}\n"
