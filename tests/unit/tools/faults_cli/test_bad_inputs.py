"""Bad input to afdep-faults: one line naming the culprit, exit 2, no
traceback, and nothing built (each row a mistake a new user made)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[4]
PYTHONPATH = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])  # this tree first
FIXTURE = REPO / "tests/fixtures/flag_payload"
FIXTURE_CATALOG = str(FIXTURE / "catalog.toml")
AFDEP_CATALOG = str(REPO / "catalogs/afdep.toml")
PROG = "python -m faults"  # what the one line starts with


def faults(*words: str, cwd: Path = REPO, tmp: Path | None = None, knobs: dict | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AFDEP_")}  # the row's own
    env.update(knobs or {}, PYTHONPATH=PYTHONPATH, CUDA_VISIBLE_DEVICES="")  # as on CI
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return subprocess.run(
        [sys.executable, "-m", "faults", *words],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def fixture(*words: str) -> list[str]:
    return ["--catalog", FIXTURE_CATALOG, "--root", str(REPO), *words]


ROWS = {
    "config typo": (fixture("sweep", "--config", "defualt"), "--config 'defualt': no such config"),
    "invalid --only": (fixture("sweep", "--only", "["), "--only '[': not a regular expression"),
    "--only matching nothing": (
        fixture("sweep", "--only", "ZZ"),
        "--only 'ZZ' matches no fault id (a pattern matches whole ids); known: D1, N1, S1, S2",
    ),
    "--repeat 0": (fixture("sweep", "--repeat", "0"), "argument --repeat: at least 1, got 0"),
    "--repeat negative": (
        fixture("run", "S1", "--repeat", "-3"),
        "argument --repeat: at least 1, got -3",
    ),
    "--slots 0": (fixture("sweep", "--slots", "0"), "argument --slots: at least 1, got 0"),
    "unknown fault id": (
        ["--catalog", AFDEP_CATALOG, "run", "ZZ"],
        "no fault 'ZZ'; 122 in all (the `list` command names them all)",
    ),
    "a fault id one word off": (
        ["--catalog", AFDEP_CATALOG, "run", "gen.skip.cb.ffn_combine.row_wait"],
        "no fault 'gen.skip.cb.ffn_combine.row_wait'; nearest: "
        "gen.skip.cb.ffn_combine.row_release, gen.skip.cb.attention_combine.row_wait, "
        "gen.delay.cb.ffn_combine.row_store; 122 in all (the `list` command names them all)",
    ),
    "--only one letter short of a fault": (
        ["--catalog", AFDEP_CATALOG, "sweep", "--only", "N2s.unev"],
        "--only 'N2s.unev' matches no fault id (a pattern matches whole ids); nearest: "
        "N2s.uneven, N5s.uneven, P5s.uneven; 122 in all",
    ),
    "unknown fault to show": (fixture("show", "ZZ"), "no fault 'ZZ'"),
    "a run that needs GPUs": (
        ["--catalog", AFDEP_CATALOG, "run", "N2"],
        "no chosen config fits this machine's 0 GPUs: bf16-eager needs 2",
    ),
    "a catalog that is not there": (["--catalog", "nope.toml", "list"], "nope.toml: not a file"),
    "review --run on a CPU": (
        ["--catalog", AFDEP_CATALOG, "review", "HEAD", "--run"],
        "review --run: the target needs 2 GPUs, this machine has 0",
    ),
    "review of a mistyped ref": (
        fixture("review", "origni/main"),
        "unknown git ref 'origni/main'",
    ),
    "sites of a folder that is not there": (["sites", "nope"], "sites: nope: no such file"),
    "sites of a folder without sources": (
        ["sites", "docs"],
        "sites: docs: no source file under it",
    ),
    "sites of a binary file": (["sites", sys.executable], "not a text source"),
    "--root a file": (["--root", str(REPO / "README.md"), "list"], "not a directory"),
    "--catalog a folder": (["--catalog", str(REPO / "catalogs"), "list"], "catalogs: not a file"),
    "--workdir where no folder can be": (
        fixture("--workdir", "/dev/null/w", "run", "S1"),
        "--workdir /dev/null/w: cannot create it (Not a directory)",
    ),
    "apply --out where no folder can be": (
        fixture("apply", "S1", "--out", "/dev/null/x"),
        "apply: --out's folder /dev/null: not a directory",
    ),
    "run --report where no file can be": (
        fixture("run", "S1", "--report", "/dev/null/r.json"),
        "--report's folder /dev/null: not a directory",
    ),
    "--workdir inside the sources": (
        ["--workdir", str(FIXTURE / "w"), *fixture("run", "D1")],
        f"--workdir {FIXTURE / 'w'}: inside the target's sources (tests/fixtures/flag_payload)",
    ),
    "review --sarif inside the sources": (
        fixture("review", "HEAD", "--sarif", str(FIXTURE / "r.sarif")),
        f"--sarif {FIXTURE / 'r.sarif'}: inside the target's sources",
    ),
    "run --report into a folder that is not there": (
        fixture("run", "S1", "--report", "/tmp/no-such-folder-faults/x/r.json"),
        "--report /tmp/no-such-folder-faults/x/r.json: its folder "
        "/tmp/no-such-folder-faults/x does not exist",
    ),
    "review --sarif into a folder that is not there": (
        fixture("review", "HEAD", "--sarif", "/tmp/no-such-folder-faults/r.sarif"),
        "--sarif /tmp/no-such-folder-faults/r.sarif: its folder /tmp/no-such-folder-faults "
        "does not exist",
    ),
    "--results-dir a file": (
        fixture("sweep", "--results-dir", "/dev/null"),
        "--results-dir /dev/null: not a directory",
    ),
    "review of one commit against itself": (
        fixture("review", "HEAD", "HEAD"),
        "BASE HEAD and CHANGE HEAD are one commit: nothing to review",
    ),
    # Rows whose message is the whole line (the newcomer's trial).
    "a catalog that is a binary file": (
        ["--catalog", sys.executable, "list"],
        f"{PROG}: error: {sys.executable}: cannot read: not UTF-8 text (a TOML catalog is)",
    ),
    "corpus --only not a regular expression": (
        ["corpus", "corpus/afdep", "--only", "("],
        f"{PROG}: error: --only '(': not a regular expression (missing ), unterminated "
        "subpattern at position 0)",
    ),
    "--results-dir in the target's sources": (
        ["sweep", "--results-dir", "afdep/csrc"],
        f"{PROG}: error: --results-dir afdep/csrc: inside the target's sources (afdep/csrc); "
        "the command's files would change the tree it judges",
    ),
    "--results-dir under the target's sources": (
        fixture("sweep", "--results-dir", "tests/fixtures/flag_payload/out"),
        f"{PROG}: error: --results-dir tests/fixtures/flag_payload/out: inside the target's "
        "sources (tests/fixtures/flag_payload); the command's files would change the tree it judges",
    ),
    "--history in the target's sources": (
        fixture("sweep", "--history", "tests/fixtures/flag_payload/h.sqlite"),
        f"{PROG}: error: --history tests/fixtures/flag_payload/h.sqlite: inside the target's "
        "sources (tests/fixtures/flag_payload); the command's files would change the tree it judges",
    ),
    "sites --check of a file that is not a source": (
        ["sites", "--check", "README.md"],
        f"{PROG}: error: sites: README.md: not a source file (a source ends in .cuh, .cu, .h, "
        ".hpp, .cpp or .cc)",
    ),
    "--seeds past 1000": (
        fixture("sweep", "--seeds", "1000000"),
        f"{PROG} sweep: error: argument --seeds: at most 1000, got 1000000",
    ),
}


@pytest.mark.parametrize("words, message", ROWS.values(), ids=ROWS.keys())
def test_bad_input_is_one_line_naming_it(words, message, tmp_path):
    result = faults(*words, tmp=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()], result.stderr
    assert message in result.stderr
    assert result.returncode == 2
    assert list(tmp_path.iterdir()) == []  # nothing was built
    assert not (FIXTURE / "out").exists() and not (FIXTURE / "h.sqlite").exists()
    assert not list((REPO / "afdep/csrc").glob("sweep-*"))  # no report among the sources


def catalog_with(tmp_path: Path, old: str, new: str) -> str:
    text = Path(FIXTURE_CATALOG).read_text()
    assert old in text
    path = tmp_path.parent / f"{tmp_path.name}-catalog.toml"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "ns = 200_000_000 }]",
            "ns = 18_446_744_073_709_551_616 }]",
            "fault D1 patch #0: ns: 18446744073709551616 ns does not fit a signed 64-bit count",
        ),
        ("[[fault]]", "[[not_a_fault]]", "unknown tables ['not_a_fault']"),
    ],
    ids=["a delay past 64 bits", "a misspelt table"],
)
def test_a_bad_catalog_is_named_before_any_build(tmp_path, old, new, message):
    catalog = catalog_with(tmp_path, old, new)
    result = faults("--catalog", catalog, "--root", str(REPO), "sweep", tmp=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert f"{catalog}: " in result.stderr and message in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_catalog_without_faults_is_refused(tmp_path):
    text = Path(FIXTURE_CATALOG).read_text()
    catalog = tmp_path.parent / f"{tmp_path.name}-empty.toml"
    catalog.write_text(text[: text.index("[[fault]]")])
    result = faults("--catalog", str(catalog), "--root", str(REPO), "sweep", tmp=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no [[fault]]" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_results_folder_is_named_before_any_build(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    result = faults(*fixture("sweep", "--results-dir", str(blocker / "out")), tmp=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--results-dir {blocker / 'out'}: cannot create it (Not a directory)" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_history_that_is_not_one_is_named_before_any_build(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    result = faults(*fixture("sweep", "--history", str(text)), tmp=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"{PROG}: error: --history {text}: not a sweep history (file is not a database)"
    ]
    assert list(tmp_path.iterdir()) == [text]
    assert text.read_text() == "not a database\n" * 100


def test_review_outside_git_and_from_a_subdirectory(tmp_path, monkeypatch):
    from tests.unit.faults.review.test_review import kept_reviews
    from tools.faults_cli.main import main

    plain = tmp_path / "plain"
    shutil.copytree(FIXTURE, plain / "fx")
    outside = faults(
        "--catalog", str(plain / "fx/catalog.toml"), "--root", str(plain), "review", "HEAD"
    )
    assert outside.returncode == 2 and "Traceback" not in outside.stderr
    assert f"{plain} is not inside a git repository" in outside.stderr
    # From a subdirectory of a checkout the review finds the checkout's top.
    monkeypatch.chdir(REPO / "afdep" / "csrc")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # as on CI
    with kept_reviews() as kept:
        main(["review", "HEAD"])
    [result] = kept
    assert (result.base, result.change, result.tree) == ("HEAD", "working tree", REPO.resolve())


def test_the_sweep_and_the_review_leave_no_temporary_folder(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    results = tmp_path / "results"
    sweep = faults(*fixture("sweep", "--only", "D1", "--results-dir", str(results)), tmp=temp)
    assert sweep.returncode == 0, sweep.stdout + sweep.stderr
    # No terminal here: its progress lines carry the count (ProgressLines).
    assert re.search(r"^ *[\d.]+ s  \[0/1\]  D1@default#0 ", sweep.stdout, re.M), sweep.stdout
    afdep = faults("--catalog", AFDEP_CATALOG, "--no-generated", "sweep", "--only", "P1",
                   "--results-dir", str(results), tmp=temp)  # fmt: skip
    assert afdep.returncode == 0, afdep.stdout + afdep.stderr
    review = faults(*fixture("review", "HEAD~1", "HEAD"), tmp=temp)
    assert "Traceback" not in review.stderr
    assert list(temp.iterdir()) == []
    kept = faults(
        *fixture("--keep", "sweep", "--only", "D1", "--results-dir", str(results)), tmp=temp
    )
    assert kept.returncode == 0, kept.stderr
    [folder] = temp.iterdir()
    assert f"scratch trees and logs kept (--keep): {folder}" in kept.stdout
    shutil.rmtree(folder)
    # A fault that misses its expectation (N1 never fires) keeps its logs, and says where.
    failed = faults(*fixture("sweep", "--only", "N1", "--results-dir", str(results)), tmp=temp)
    assert failed.returncode == 1, failed.stderr
    [folder] = temp.iterdir()
    assert f"scratch trees and logs kept (a run failed): {folder}" in failed.stdout


ANCHORED_CATALOG = REPO / "tests/fixtures/flag_payload_anchored/catalog.toml"


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'at = "channel.flag.store("',
            'at = "round_idx + 1"',
            "target.site[1] (fx.producer.flag_release): at found 2 times in main.cpp "
            "(lines 34, 40)",
        ),
        (
            "[target.bound]",
            '[target.contract]\nrelase = { sys = "st_release" }\n\n[target.bound]',
            "target.contract: unknown keys ['relase']",
        ),
        (
            "[target.bound]",
            '[target.contract]\nptx_inputs = ["../elsewhere"]\n\n[target.bound]',
            "target.contract: ptx_inputs: '../elsewhere' is not inside the tree",
        ),
        (
            "[target.bound]",
            '[target.contract]\nptx_inputs = "harness"\n\n[target.bound]',
            "target.contract: ptx_inputs: a list of paths, got 'harness'",
        ),
        (
            "[target.bound]",
            '[target.contract]\nptx_units = ["main.cpp"]\nptx = ["cc", "{tree}/{unit}", "{ptx}"]'
            "\n\n[target.bound]",
            "target.contract: ptx: with ptx_units, a word {deps} (one unit's compile: its source,"
            " its PTX, its dependencies)",
        ),
        (
            "[target.bound]",
            '[target.identity]\nfile = "main.cpp"\nbefore = "nowhere"\nsay = \'puts("{digest}");\''
            "\n\n[target.bound]",
            "target.identity: before 'nowhere' is on 0 lines (needs exactly 1) of "
            f"{REPO}/tests/fixtures/flag_payload_anchored/main.cpp",
        ),
    ],
    ids=["an anchor found twice", "an unknown spelling", "a ptx input outside", "not a list",
         "a unit's compile writing no dependencies", "an identity line not in the tree"],
)
@pytest.mark.parametrize("command", [["sweep"], ["apply", "D1", "--out", "applied"]])
def test_a_bad_anchor_or_spelling_is_one_line_before_any_work(
    tmp_path, old, new, message, command
):
    text = ANCHORED_CATALOG.read_text()
    assert old in text
    catalog = tmp_path.parent / f"{tmp_path.name}-anchored.toml"
    catalog.write_text(text.replace(old, new, 1))
    words = [w if w != "applied" else str(tmp_path / "applied") for w in command]
    result = faults("--catalog", str(catalog), "--root", str(REPO), *words, tmp=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [f"{PROG}: error: {catalog}: {message}"], result.stderr
    assert list(tmp_path.iterdir()) == []


# Where no command writes (hostio.output_problem, the one rule): each argument
# naming an output, pointed into the target's sources or over a tracked file.
SOURCES = "afdep/csrc"  # the afdep catalog's, the project's default
OUTPUT_ROWS = {
    "init --out in the sources": (["init", SOURCES, "--out", f"{SOURCES}/x"], "--out"),
    "init --out in the tree it scans": (
        ["init", "tests/fixtures/flag_payload", "--out", "tests/fixtures/flag_payload/x"],
        "--out",
    ),
    "apply --out": (["apply", "P1", "--out", f"{SOURCES}/x"], "--out"),
    "review --report": (["review", "HEAD", "--report", f"{SOURCES}/x.md"], "--report"),
    "run --report": (["run", "P1", "--report", f"{SOURCES}/x.json"], "--report"),
    "--workdir of list": (["--workdir", f"{SOURCES}/x", "list"], "--workdir"),
    "compare --out": (["compare", "--left", "a", "--right", "b", "--out", f"{SOURCES}/x"], "--out"),
    "replay --out, a stem": (
        ["replay", "P1@bf16-eager#0", "--from", "a.json", "--out", f"{SOURCES}/x"],
        "--out",
    ),
    "shrink --results-dir": (["shrink", "N2", "--results-dir", f"{SOURCES}/x"], "--results-dir"),
    "amplify --results-dir": (["amplify", "--results-dir", f"{SOURCES}/x"], "--results-dir"),
    "corpus --results-dir": (
        ["corpus", "corpus/afdep", "--results-dir", f"{SOURCES}/x"],
        "--results-dir",
    ),
    "merge --results-dir": (["merge", "a.json", "--results-dir", f"{SOURCES}/x"], "--results-dir"),
    "run --report over the README": (["run", "P1", "--report", "README.md"], "--report"),
    "review --sarif over a doc": (["review", "HEAD", "--sarif", "docs/tools.md"], "--sarif"),
    "compare --out over a doc": (
        ["compare", "--left", "a", "--right", "b", "--out", "docs/tools.md"],
        "--out",
    ),
    "replay --out, a stem naming a doc": (
        ["replay", "P1@bf16-eager#0", "--from", "a.json", "--out", "docs/tools"],
        "--out",
    ),
    "sweep --history over the catalog": (
        ["sweep", "--history", "catalogs/afdep.toml"],
        "--history",
    ),
}
# What a refused write would have changed; git says whether anything did.
WATCHED = [SOURCES, "tests/fixtures/flag_payload", "README.md", "docs/tools.md", "catalogs"]


def changed(*paths: str) -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.parametrize("words, argument", OUTPUT_ROWS.values(), ids=OUTPUT_ROWS.keys())
def test_no_command_writes_inside_the_sources_or_over_a_tracked_file(words, argument, tmp_path):
    before = changed(*WATCHED)
    result = faults(*words, tmp=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{PROG}: error: {argument} "), line
    assert "inside the target's sources" in line or "a file the checkout tracks" in line, line
    assert changed(*WATCHED) == before
    assert list(tmp_path.iterdir()) == []


def test_a_foreign_targets_sources_are_its_catalogs_under_its_root(tmp_path):
    """--root elsewhere: the catalog's sources are found under that root, and
    no output may go there either."""
    root = tmp_path / "workspace"
    shutil.copytree(FIXTURE, root / "tests/fixtures/flag_payload")
    sources = root / "tests/fixtures/flag_payload"
    files = sorted(sources.rglob("*"))
    temp = tmp_path / "tmp"
    temp.mkdir()
    for words, argument in [
        (["--workdir", str(sources / "w"), "list"], "--workdir"),
        (["apply", "D1", "--out", str(sources / "applied")], "--out"),
    ]:
        catalog = str(sources / "catalog.toml")
        result = faults("--catalog", catalog, "--root", str(root), *words, tmp=temp)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith(f"{PROG}: error: {argument} {sources}/"), line
        assert "inside the target's sources" in line
    assert sorted(sources.rglob("*")) == files and list(temp.iterdir()) == []


# A target's knobs (the afdep catalog's [target.knobs]): checked by every
# command before any work, whatever it does.
MISSPELT = {"AFDEP_TOKNES": "5"}
KNOB_ROWS = {
    "list": (["list"], MISSPELT),
    "sweep": (["sweep"], MISSPELT),
    "init": (["init", SOURCES], MISSPELT),
    "sites": (["sites", SOURCES], MISSPELT),
    "review": (["review", "HEAD"], MISSPELT),
    "compare": (["compare", "--left", "a", "--right", "b"], MISSPELT),
    "run, a knob of a bad value": (["run", "P1"], {"AFDEP_TIMEOUT_MS": "soon"}),
}


@pytest.mark.parametrize("words, knobs", KNOB_ROWS.values(), ids=KNOB_ROWS.keys())
def test_a_bad_knob_is_refused_by_every_command(words, knobs, tmp_path):
    result = faults(*words, tmp=tmp_path, knobs=knobs)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    [line] = result.stderr.splitlines()
    [knob] = knobs
    assert line.startswith(f"{PROG}: error: ") and knob in line, line
    assert result.stdout == "" and list(tmp_path.iterdir()) == []
