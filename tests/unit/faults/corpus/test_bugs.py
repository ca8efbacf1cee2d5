"""faults.corpus.bugs: reading bug patches, committing them on a clone, reading the
review's SARIF, and the caught-by table."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from faults.corpus.bugs import (
    Bug,
    BugResult,
    Catch,
    CaughtBy,
    CorpusError,
    ReviewOutcome,
    bug_commit,
    load_bug,
    load_corpus,
    sarif_sites,
)
from faults.catalog import load_catalog
from faults.corpus.bugs_report import document, markdown, write_results
from tests.unit.faults.gitrepo import git

REPO = Path(__file__).parents[4]
ANCHORED = REPO / "tests/fixtures/flag_payload_anchored/catalog.toml"
# A target whose sites are comment sites under src/ (no anchors).
COMMENT_TARGET = replace(load_catalog(ANCHORED, tree_root=REPO).target, sources="src", anchors=())

DIFF = """diff --git a/kernel.cu b/kernel.cu
--- a/kernel.cu
+++ b/kernel.cu
@@ -1,3 +1,2 @@
 store();
-barrier();
 publish();
"""
HEADER = "class: remove-barrier\nsite: k.publish\ncatch: static\ntitle: drop the barrier\n"


def write_patch(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.patch"
    path.write_text(text)
    return path


def test_a_bug_reads_its_header(tmp_path):
    bug = load_bug(write_patch(tmp_path, "b01", HEADER + "\n" + DIFF))
    assert (bug.name, bug.bug_class, bug.site, bug.catch, bug.title) == (
        "b01",
        "remove-barrier",
        "k.publish",
        Catch.STATIC,
        "drop the barrier",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("class: x\nsite: s\ncatch: static\n" + DIFF, "header lacks title"),
        (HEADER.replace("catch: static", "catch: maybe") + DIFF, "catch 'maybe' is not one of"),
        ("colour: red\n" + DIFF, ":1: not a header line (class, site, catch, title)"),
        (HEADER, "no diff after the header"),
    ],
)
def test_a_bad_header_is_one_line_naming_the_file(tmp_path, text, message):
    path = write_patch(tmp_path, "bad", text)
    with pytest.raises(CorpusError) as error:
        load_bug(path)
    assert str(error.value).startswith(str(path))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_corpus_is_a_folder_of_patches(tmp_path):
    with pytest.raises(CorpusError, match=r"corpus .*missing: not a directory$"):
        load_corpus(tmp_path / "missing")
    with pytest.raises(CorpusError, match=r"no \*\.patch file$"):
        load_corpus(tmp_path)
    write_patch(tmp_path, "b02", HEADER + DIFF)
    write_patch(tmp_path, "b01", HEADER + DIFF)
    assert [bug.name for bug in load_corpus(tmp_path)] == ["b01", "b02"]
    assert [bug.name for bug in load_corpus(tmp_path, "b02")] == ["b02"]
    with pytest.raises(CorpusError, match=r"no \*\.patch file matches 'b9'$"):
        load_corpus(tmp_path, "b9")


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "kernel.cu").write_text("store();\nbarrier();\npublish();\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    return root


def test_a_bug_is_committed_on_a_clone_of_head(repo, tmp_path):
    bug = load_bug(write_patch(tmp_path / "corpus", "b01", HEADER + DIFF))
    base, head = bug_commit(repo, bug, tmp_path / "clone")
    assert base == git(repo, "rev-parse", "HEAD").strip()
    assert (tmp_path / "clone/kernel.cu").read_text() == "store();\npublish();\n"
    assert (repo / "kernel.cu").read_text() == "store();\nbarrier();\npublish();\n"
    assert git(tmp_path / "clone", "log", "-1", "--format=%s", head).strip() == (
        "remove-barrier: drop the barrier"
    )


def test_a_bug_is_committed_again_over_an_earlier_runs_clone(repo, tmp_path):
    bug = load_bug(write_patch(tmp_path / "corpus", "b01", HEADER + DIFF))
    bug_commit(repo, bug, tmp_path / "clone")  # a cut run leaves its clone behind
    base, head = bug_commit(repo, bug, tmp_path / "clone")
    assert git(tmp_path / "clone", "rev-parse", "HEAD~1").strip() == base
    assert (tmp_path / "clone/kernel.cu").read_text() == "store();\npublish();\n"


def test_a_bug_that_does_not_apply_is_named(repo, tmp_path):
    text = HEADER + DIFF.replace("-barrier();", "-fence();")
    bug = load_bug(write_patch(tmp_path / "corpus", "b01", text))
    with pytest.raises(CorpusError, match=r"b01\.patch: does not apply to HEAD: "):
        bug_commit(repo, bug, tmp_path / "clone")


def test_sarif_sites_come_from_properties_and_messages(tmp_path):
    sarif = tmp_path / "r.sarif"
    results = [
        {"message": {"text": "k.publish: no barrier"}, "properties": {}},
        {"message": {"text": "covering fault at k.wait killed"}, "properties": {"site": "k.other"}},
    ]
    sarif.write_text(json.dumps({"version": "2.1.0", "runs": [{"results": results}]}))
    known = {"k.publish", "k.wait", "k.other", "k.unnamed"}
    assert sarif_sites(sarif, known) == ["k.other", "k.publish", "k.wait"]
    assert sarif_sites(tmp_path / "absent.sarif", known) == []


def outcome(code: int | None, *sites: str) -> ReviewOutcome:
    return ReviewOutcome(code, list(sites), 1.5, "log")


@pytest.mark.parametrize(
    ("static", "run", "caught_by"),
    [
        (outcome(1, "k.publish"), None, CaughtBy.STATIC),
        (outcome(1, "k.other"), None, CaughtBy.MISSED),  # CHANGES NEEDED, wrong site
        (outcome(0, "k.publish"), None, CaughtBy.MISSED),  # named, but approved
        (outcome(0), outcome(1, "k.publish"), CaughtBy.RUN),
        (outcome(1, "k.publish"), outcome(1, "k.publish"), CaughtBy.BOTH),
        (outcome(None, "k.publish"), outcome(0), CaughtBy.MISSED),  # the review timed out
    ],
)
def test_caught_by_needs_changes_needed_and_the_site(tmp_path, static, run, caught_by):
    bug = Bug("b01", tmp_path / "b01.patch", "remove-barrier", "k.publish", Catch.STATIC, "t")
    assert BugResult(bug, static, run).caught_by is caught_by


def test_the_document_and_its_table(tmp_path):
    static_bug = Bug("b01", tmp_path / "b01.patch", "remove-barrier", "k.p", Catch.STATIC, "t1")
    run_bug = Bug("b02", tmp_path / "b02.patch", "epoch-off-by-one", "k.w", Catch.RUN, "t2")
    results = [
        BugResult(static_bug, outcome(1, "k.p")),
        BugResult(run_bug, outcome(0), outcome(1, "k.w")),
    ]
    doc = document(results, "1xH200", "ab" * 32)
    assert (doc["bugs"], doc["caught"], doc["classes"]) == (
        2,
        2,
        ["epoch-off-by-one", "remove-barrier"],
    )
    assert doc["static_expected_caught_statically"] is True
    assert [row["caught_by"] for row in doc["results"]] == ["static", "run"]
    table = markdown(doc).splitlines()
    assert table[-2] == "| b01 | remove-barrier | `k.p` | static | static | 1.5 | - |"
    assert table[-1] == "| b02 | epoch-off-by-one | `k.w` | run | run | 1.5 | 1.5 |"
    stem = write_results(doc, tmp_path / "results")
    assert stem.name == "review-corpus-1xH200" and doc["rank_mode"] == "per-gpu"
    assert json.loads(stem.with_suffix(".json").read_text()) == doc
    logical = document(results, "1xH200", "ab" * 32, "logical")
    assert (
        markdown(logical).splitlines()[0] == "# Review corpus on 1xH200 (logical ranks on one GPU)"
    )
    assert write_results(logical, tmp_path / "results").name == "review-corpus-1xH200-logical"


def test_a_bug_on_a_base_older_than_the_catalog_says_what_was_left_out(tmp_path):
    bug = Bug("C", tmp_path / "c.toml", "wrong-count", "", Catch.MISSED, "t", why="no site")
    older = "Judged by `c.toml`, the tree's own catalog refused (x); left out ...: `R1`."
    doc = document([BugResult(bug, outcome(1), older=older)], "cpu", "0" * 64)
    [row] = doc["results"]
    assert (row["caught_by"], row["older"]) == ("missed", older)
    assert markdown(doc).splitlines()[-1] == f"- C: no site; {older.rstrip('.')}."
    plain = document([BugResult(bug, outcome(1))], "cpu", "0" * 64)
    assert "older" not in plain["results"][0]


def test_a_static_bug_caught_only_by_the_run_is_flagged(tmp_path):
    bug = Bug("b01", tmp_path / "b01.patch", "remove-barrier", "k.p", Catch.STATIC, "t")
    doc = document([BugResult(bug, outcome(0), outcome(1, "k.p"))], "cpu", "0" * 64)
    assert doc["static_expected_caught_statically"] is False


def test_a_bug_that_cannot_be_reviewed_stops_the_corpus_before_any_review(repo, tmp_path):
    from faults.corpus.bugs import run_corpus

    (repo / "src").mkdir()
    (repo / "src/k.cu").write_text("// @site k.publish kind=store\nx = 1;\n// @end k.publish\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "site")
    good = load_bug(write_patch(tmp_path / "corpus", "b01", HEADER + DIFF))
    stray = load_bug(
        write_patch(tmp_path / "corpus", "b02", HEADER.replace("k.publish", "k.gone") + DIFF)
    )
    reviewed = []
    with pytest.raises(CorpusError, match=r"b02\.patch: site k\.gone is not a site of HEAD$"):
        run_corpus(repo, COMMENT_TARGET, [good, stray], tmp_path / "work", run=False,
                   say=reviewed.append)
    stale = load_bug(
        write_patch(tmp_path / "corpus", "b03", HEADER + DIFF.replace("-barrier", "-fence"))
    )
    with pytest.raises(CorpusError, match=r"b03\.patch: does not apply to HEAD"):
        run_corpus(repo, COMMENT_TARGET, [good, stale], tmp_path / "work2", run=False,
                   say=reviewed.append)
    assert reviewed == []  # neither run reviewed its good bug


def test_a_bug_at_an_anchored_site_is_a_bug_at_a_site_of_head(repo, tmp_path):
    """tests/fixtures/flag_payload_anchored's sites, declared by anchors, are
    sites of HEAD: only the bug naming none of them stops the corpus."""
    from faults.corpus.bugs import run_corpus

    (repo / "anchored").mkdir()
    shutil.copy2(ANCHORED.parent / "main.cpp", repo / "anchored/main.cpp")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "foreign code")
    target = replace(load_catalog(ANCHORED, tree_root=REPO).target, sources="anchored")
    at_site = load_bug(write_patch(
        tmp_path / "corpus", "b01", HEADER.replace("k.publish", "fx.producer.flag_release") + DIFF
    ))
    stray = load_bug(
        write_patch(tmp_path / "corpus", "b02", HEADER.replace("k.publish", "fx.gone") + DIFF)
    )
    with pytest.raises(CorpusError, match=r"b02\.patch: site fx\.gone is not a site of HEAD$"):
        run_corpus(repo, target, [at_site, stray], tmp_path / "work", run=False)


def test_a_run_review_takes_the_slots_and_the_rank_mode(tmp_path):
    import sys

    from faults.corpus.bugs import review_words

    sarif = tmp_path / "w/review-run.sarif"
    words = review_words(
        tmp_path / "c", "B", "H", tmp_path / "w", sarif, run=True, rank_mode="logical", slots=4
    )
    assert words == [
        *(sys.executable, "-m", "faults", "--root", str(tmp_path / "c")),
        *("--workdir", str(tmp_path / "w/run"), "--rank-mode", "logical"),
        *("review", "B", "H", "--sarif", str(sarif), "--run", "--slots", "4"),
    ]
    static = review_words(
        tmp_path / "c", "B", "H", tmp_path / "w", sarif, run=False, rank_mode="auto", slots=4
    )
    assert static[-3:] == ["H", "--sarif", str(sarif)] and "--run" not in static
    without_twins = review_words(
        tmp_path / "c",
        "B",
        "H",
        tmp_path / "w",
        sarif,
        run=True,
        rank_mode="auto",
        slots=1,
        exposure=False,
    )
    assert without_twins[-4:] == ["--run", "--slots", "1", "--no-exposure"]


def test_a_corpus_run_in_shards_builds_one_document(tmp_path):
    first = Bug("b01", tmp_path / "b01.patch", "remove-barrier", "k.p", Catch.STATIC, "t1")
    second = Bug("b02", tmp_path / "b02.patch", "epoch-off-by-one", "k.w", Catch.RUN, "t2")
    results = tmp_path / "results"
    write_results(
        document([BugResult(second, outcome(0), outcome(0))], "1xH200", "ab" * 32), results
    )
    write_results(document([BugResult(first, outcome(1, "k.p"))], "1xH200", "ab" * 32), results)
    again = document([BugResult(second, outcome(0), outcome(1, "k.w"))], "1xH200", "ab" * 32)
    stem = write_results(again, results)
    doc = json.loads(stem.with_suffix(".json").read_text())
    assert [(row["bug"], row["caught_by"]) for row in doc["results"]] == [
        ("b01", "static"),
        ("b02", "run"),  # reviewed again: its new row replaces the missed one
    ]
    assert (doc["bugs"], doc["caught"], doc["classes"]) == (
        2,
        2,
        ["epoch-off-by-one", "remove-barrier"],
    )
    other_source = document([BugResult(first, outcome(1, "k.p"))], "1xH200", "cd" * 32)
    assert (
        json.loads(write_results(other_source, results).with_suffix(".json").read_text())["bugs"]
        == 1
    )  # another source digest starts a new document


def test_a_foreign_corpus_run_a_bug_a_command_builds_one_document_of_many_bases(tmp_path):
    """A foreign corpus's bugs sit on several releases: its shards merge by the
    corpus's own digest, each row carrying its base's sources digest."""
    first = Bug("A", tmp_path / "c.toml", "wrong-sentinel", "", Catch.MISSED, "t", why="no site")
    second = Bug("B", tmp_path / "c.toml", "publish-early", "k.p", Catch.STATIC, "t")
    results = tmp_path / "results"

    def shard(bug, base, corpus_digest="ab" * 32):
        found = outcome(1, bug.site) if bug.site else outcome(0)
        doc = document(
            [BugResult(bug, found, found)],
            "1xH200",
            corpus_digest,
            "logical",
            corpus="target",
            base_digests={bug.name: base},
        )
        return json.loads(write_results(doc, results).with_suffix(".json").read_text())

    shard(first, "01" * 32)
    doc = shard(second, "02" * 32)
    assert [(row["bug"], row["base_source_sha256"]) for row in doc["results"]] == [
        ("A", "01" * 32),
        ("B", "02" * 32),
    ]
    assert (doc["corpus_sha256"], doc["bugs"], doc["caught"]) == ("ab" * 32, 2, 1)
    assert "native_source_sha256" not in doc
    table = markdown(doc).splitlines()
    assert table[2].startswith("Corpus digest `" + "ab" * 32 + "` (its file, catalog and harness;")
    row = f"| B | publish-early | `k.p` | static | both | 1.5 | 1.5 | `{'02' * 6}` |"
    assert table[table.index(row) - 1].startswith("| A | wrong-sentinel | `` | missed | missed |")
    assert shard(first, "01" * 32, corpus_digest="cd" * 32)["bugs"] == 1  # another corpus


def test_a_bug_no_longer_in_the_corpus_leaves_the_document(tmp_path):
    """A patch replaced under a new name (b24-count-tokens by b24-count-words)
    must not leave its old row behind when the corpus is reviewed again."""
    old = Bug("b24-old", tmp_path / "a.patch", "wrong-count", "k.c", Catch.RUN, "t")
    new = Bug("b24-new", tmp_path / "b.patch", "wrong-count", "k.c", Catch.RUN, "t")
    kept = Bug("b01", tmp_path / "c.patch", "remove-barrier", "k.p", Catch.STATIC, "t")
    results = tmp_path / "results"
    for bug in (old, kept):
        write_results(document([BugResult(bug, outcome(1, bug.site))], "cpu", "ab" * 32), results)
    again = document([BugResult(new, outcome(1, "k.c"))], "cpu", "ab" * 32)
    stem = write_results(again, results, {"b01", "b24-new"})
    doc = json.loads(stem.with_suffix(".json").read_text())
    assert [row["bug"] for row in doc["results"]] == ["b01", "b24-new"]
    assert doc["bugs"] == 2 and "b24-old" not in stem.with_suffix(".md").read_text()


def test_the_committed_corpus_is_what_make_corpus_writes(tmp_path):
    """corpus/afdep.toml is the corpus's source: each committed patch is what
    scripts/make_corpus.py writes from it over HEAD's kernels, and no patch
    is left whose bug the TOML no longer lists."""
    import importlib.util

    import tomllib

    repo = Path(__file__).resolve().parents[4]
    clone = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", "--shared", str(repo), str(clone)], check=True)
    spec = importlib.util.spec_from_file_location("make_corpus", clone / "scripts/make_corpus.py")
    make_corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_corpus)
    make_corpus.main(clone)
    changed = subprocess.run(
        ["git", "-C", str(clone), "status", "--porcelain", "--", "corpus"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert changed == ""
    listed = {
        bug["name"] for bug in tomllib.loads((clone / "corpus/afdep.toml").read_text())["bug"]
    }
    assert {path.stem for path in (clone / "corpus/afdep").glob("*.patch")} == listed


def test_a_run_only_bug_without_a_run_is_not_run_not_missed(tmp_path):
    """A bug only a run catches, reviewed with no run (no --run, or no GPUs):
    NOT RUN, saying why, outside the caught and judged counts; caught
    statically all the same, it is caught."""
    run_bug = Bug("b02", tmp_path / "b02.patch", "epoch-off-by-one", "k.w", Catch.RUN, "t2")
    static_bug = Bug("b01", tmp_path / "b01.patch", "remove-barrier", "k.p", Catch.STATIC, "t1")
    why = "only a run catches it: the target's runs need 2 GPUs, this machine has 0"
    assert BugResult(run_bug, outcome(0), None, why).caught_by is CaughtBy.NOT_RUN
    assert BugResult(run_bug, outcome(1, "k.w"), None, why).caught_by is CaughtBy.STATIC
    assert BugResult(run_bug, outcome(0), outcome(0)).caught_by is CaughtBy.MISSED  # it ran
    assert BugResult(static_bug, outcome(0), None, why).caught_by is CaughtBy.MISSED
    doc = document(
        [BugResult(static_bug, outcome(1, "k.p")), BugResult(run_bug, outcome(0), None, why)],
        "cpu",
        "ab" * 32,
    )
    assert (doc["bugs"], doc["caught"], doc["not_run"], doc["judged"]) == (2, 1, 1, 1)
    assert doc["results"][1]["caught_by"] == "not run"
    assert doc["results"][1]["not_run_why"] == why
    assert "not_run_why" not in doc["results"][0]
    lines = markdown(doc).splitlines()
    assert lines[2] == (
        f"Source digest `{'ab' * 32}`; 2 bugs in 2 classes; caught 1 of the 1 judged; 1 not run."
    )
    assert lines[-1] == "| b02 | epoch-off-by-one | `k.w` | run | not run | 1.5 | - |"


@pytest.mark.skipif(
    not (Path(__file__).parents[4] / ".git").exists(),
    reason="the corpus is committed on a clone of HEAD",
)
def test_the_corpus_on_a_cpu_judges_only_what_ran(tmp_path):
    """`corpus corpus/afdep` on a CPU: a run-only bug is not run (said why),
    the exit status is of what was judged, and the work folder goes."""
    import os
    import sys

    repo = Path(__file__).resolve().parents[4]
    temp, results = tmp_path / "tmp", tmp_path / "results"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AFDEP_")}
    env.update(PYTHONPATH=str(repo), CUDA_VISIBLE_DEVICES="", TMPDIR=str(temp))
    done = subprocess.run(
        [sys.executable, "-m", "faults", "corpus", "corpus/afdep", "--only", "b15-row-wait-epoch"]
        + ["--results-dir", str(results)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    why = "only a run catches it: the target's runs need 2 GPUs, this machine has 0"
    assert done.returncode == 0, done.stdout + done.stderr
    line, last = done.stdout.splitlines()
    assert line.startswith("b15-row-wait-epoch class=epoch-off-by-one expected=run ")
    assert line.endswith(f" ({why})") and " caught_by=not run " in line
    assert last == (
        f"0 of 0 bugs caught; 1 not run ({why}); reports: {results}/review-corpus-cpu.json .md"
    )
    assert list(temp.iterdir()) == []  # no work folder kept: no run failed
    [row] = json.loads((results / "review-corpus-cpu.json").read_text())["results"]
    assert (row["caught_by"], row["not_run_why"]) == ("not run", why)
