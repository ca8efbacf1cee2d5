"""faults.corpus.releases: a fix's hunks undone on a base text, and a foreign
corpus's bad inputs, each one line naming the bug and key."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from faults.corpus.bugs import BugClass, Catch, CorpusError
from faults.corpus.releases import diff_hunks, load_release_corpus, revert_hunks

BUGGY = "a\nb\nc\nd\nstore\nrelease\ne\nf\ng\nh\ni\nj\nk\nl\nm\nwait\nn\no\np\n"
# The fix moves the release below a barrier (hunk 1) and makes the wait acquire (hunk 2).
FIXED = "a\nb\nc\nd\nstore\nbarrier\nrelease\ne\nf\ng\nh\ni\nj\nk\nl\nm\nacquire\nn\no\np\n"
# A later release: two lines more at the top (an offset), the rest as fixed.
BASE = "x\ny\n" + FIXED


def test_the_hunks_are_diff_us_with_three_lines_of_context():
    hunks = diff_hunks(BUGGY, FIXED)
    assert [(h.number, "".join(h.buggy), "".join(h.fixed)) for h in hunks] == [
        (1, "c\nd\nstore\nrelease\ne\nf\n", "c\nd\nstore\nbarrier\nrelease\ne\nf\n"),
        (2, "k\nl\nm\nwait\nn\no\np\n", "k\nl\nm\nacquire\nn\no\np\n"),
    ]


def test_one_hunk_undone_at_an_offset():
    assert revert_hunks(BASE, BUGGY, FIXED, (1,), "bug B: k.cuh") == "x\ny\n" + BUGGY.replace(
        "wait", "acquire"
    )


def test_every_hunk_undone_gives_the_buggy_text():
    assert revert_hunks(FIXED, BUGGY, FIXED, (2, 1), "bug B: k.cuh") == BUGGY


@pytest.mark.parametrize(
    ("base", "numbers", "message"),
    [
        (BASE.replace("barrier\n", "fence\n"), (1,),
         "bug B: k.cuh: hunk 1: its fixed lines are not found in the base"),
        (BASE + BASE, (2,), "bug B: k.cuh: hunk 2: its fixed lines are found 2 times in the base"),
        (BASE, (3,), "bug B: k.cuh: hunk 3: the diff has 2 hunks"),
    ],
)
def test_a_hunk_not_found_exactly_once_is_refused(base, numbers, message):
    with pytest.raises(CorpusError) as error:
        revert_hunks(base, BUGGY, FIXED, numbers, "bug B: k.cuh")
    assert str(error.value) == message


RELEASES = """
package = "pkg"
catalog = "catalogs/t.toml"
harness = ["tools/targets/t/harness.cu"]
members = ["include"]
[release."1.0"]
file = "pkg-1.0.tar.gz"
sha256 = "%s"
prefix = "pkg-1.0"
[release."1.1"]
file = "pkg-1.1-py3-none-any.whl"
sha256 = "%s"
prefix = "pkg/data"
""" % ("a" * 64, "b" * 64)
BUG = {
    "name": "B",
    "class": "publish-early",
    "site": "t.release",
    "catch": "static",
    "why": "the release precedes the stores it orders",
    "title": "release first",
    "upstream": "pkg 1.1",
    "buggy": "1.0",
    "fixed": "1.1",
    "base": "1.1",
    "file": "include/k.cuh",
    "hunks": [1],
}


def write(tmp_path: Path, bug: dict, extra: str = "") -> Path:
    def value(v):
        return str(v) if isinstance(v, list) else f'"{v}"'

    text = RELEASES + extra + "[[bug]]\n" + "".join(f"{k} = {value(v)}\n" for k, v in bug.items())
    path = tmp_path / "t.toml"
    path.write_text(text)
    return path


def test_a_corpus_entry_reads_its_bug(tmp_path):
    corpus = load_release_corpus(write(tmp_path, BUG))
    (made,) = corpus.bugs
    assert (made.bug.name, made.bug.bug_class, made.bug.site, made.bug.catch) == (
        "B", BugClass.PUBLISH_EARLY, "t.release", Catch.STATIC
    )
    assert (made.buggy.version, made.fixed.pin.prefix, made.base.pin.file) == (
        "1.0", "pkg/data", "pkg-1.1-py3-none-any.whl"
    )
    assert (made.base.pin.spec, made.file, made.hunks) == ("pkg==1.1", "include/k.cuh", (1,))
    assert made.base.pin.where.endswith(": release '1.1'")  # every fetch error names it
    assert (corpus.package, corpus.catalog, corpus.harness, corpus.members) == (
        "pkg", "catalogs/t.toml", ("tools/targets/t/harness.cu",), ("include",)
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hunks": None}, "bug B: lacks hunks"),
        ({"class": "slow"}, "bug B: class 'slow' is not one of"),
        ({"catch": "maybe"}, "bug B: catch 'maybe' is not one of"),
        ({"buggy": "0.9"}, "bug B: buggy '0.9' has no [release] entry"),
        ({"base": "2.0"}, "bug B: base '2.0' has no [release] entry"),
        ({"hunks": [0]}, "bug B: hunks must be hunk numbers from 1"),
        ({"why": " "}, "bug B: why is empty"),
        ({"colour": "red"}, "bug B: unknown key colour"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_bug_and_key(tmp_path, change, message):
    bug = {k: v for k, v in {**BUG, **change}.items() if v is not None}
    path = write(tmp_path, bug)
    with pytest.raises(CorpusError) as error:
        load_release_corpus(path)
    said = str(error.value)
    assert said.startswith(f"{path}: {message}") and "\n" not in said


def test_a_release_without_its_digest_is_refused(tmp_path):
    path = write(tmp_path, BUG)
    path.write_text(path.read_text().replace('sha256 = "' + "a" * 64 + '"', 'sha256 = "00"'))
    with pytest.raises(CorpusError) as error:
        load_release_corpus(path)
    assert str(error.value) == f"{path}: release '1.0': sha256 is not 64 lowercase hex digits"


def test_the_repositorys_foreign_corpus_loads():
    corpus = load_release_corpus(Path(__file__).parents[4] / "corpus/flashinfer_comm.toml")
    assert {bug.bug.name[0] for bug in corpus.bugs} == set("ABCDEFGHIJKMNOPQ")
    assert [fix["name"] for fix in corpus.not_made] == ["L-mnnvl-arrive-relaxed-red-sm90"]
    for made in corpus.bugs:
        assert bool(made.bug.site) != (made.bug.catch is Catch.MISSED), made.bug.name


def test_a_release_holds_a_moved_member_at_its_path(tmp_path):
    extra = '[release."1.2"]\nfile = "pkg-1.2.tar.gz"\nsha256 = "%s"\nprefix = "pkg-1.2"\n' % (
        "c" * 64
    ) + 'moved = { "spdlog/include/" = "3rdparty/spdlog/include" }\n'
    corpus = load_release_corpus(write(tmp_path, {**BUG, "base": "1.2"}, extra))
    (made,) = corpus.bugs
    assert made.base.moved == (("spdlog/include", "3rdparty/spdlog/include"),)
    assert made.base.holds("spdlog/include") == "3rdparty/spdlog/include"
    assert made.base.holds("include") == "include"
    assert made.base.holds("spdlog/include/x.h") == "3rdparty/spdlog/include/x.h"
    assert made.base.holds("spdlog/includes") == "spdlog/includes"
    assert made.fixed.moved == ()


def test_a_bug_whose_file_a_release_moves_is_refused(tmp_path):
    extra = '[release."1.2"]\nfile = "pkg-1.2.tar.gz"\nsha256 = "%s"\nprefix = "pkg-1.2"\n' % (
        "c" * 64
    ) + 'moved = { "include" = "3rdparty/include" }\n'
    path = write(tmp_path, {**BUG, "base": "1.2"}, extra)
    with pytest.raises(CorpusError) as error:
        load_release_corpus(path)
    assert str(error.value) == (
        f"{path}: bug B: file 'include/k.cuh' is moved in release '1.2';"
        " a bug's file must lie at its own path"
    )


def test_a_release_that_is_not_a_table_is_refused(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(RELEASES.split("[release.")[0] + "release = 3\n")
    with pytest.raises(CorpusError) as error:
        load_release_corpus(path)
    assert str(error.value) == (
        f'{path}: release must be a table of [release."<version>"] tables'
    )


def test_a_moved_that_is_not_a_table_of_paths_is_refused(tmp_path):
    extra = '[release."1.2"]\nfile = "f"\nsha256 = "%s"\nprefix = "p"\nmoved = ["x"]\n' % (
        "c" * 64
    )
    path = write(tmp_path, BUG, extra)
    with pytest.raises(CorpusError) as error:
        load_release_corpus(path)
    assert str(error.value) == f"{path}: release '1.2': moved must map members to paths"


def test_the_cub_scan_corpus_loads():
    root = Path(__file__).parents[4]
    corpus = load_release_corpus(root / "corpus/cub_scan.toml")
    assert corpus.package == "nvidia-cuda-cccl-cu12"
    assert [bug.bug.name[0] for bug in corpus.bugs] == list("ABCD")
    assert [fix["name"] for fix in corpus.not_made] == [
        "E-word-status-store-cg",
        "F-select-inplace-tile-state-relaxed",
    ]
    catalog = tomllib.loads((root / corpus.catalog).read_text())
    sites = {site["name"] for site in catalog["target"]["site"]}
    release = tomllib.loads((root / "tools/targets/cub_scan/release.toml").read_text())
    # The pin's members, and the header CUB's config.cuh includes before 2.8.
    assert sorted(corpus.members) == sorted(
        [*release["members"], "include/cub/util_deprecated.cuh"]
    )
    for made in corpus.bugs:
        assert bool(made.bug.site) != (made.bug.catch is Catch.MISSED), made.bug.name
        assert not made.bug.site or made.bug.site in sites, made.bug.name
        assert made.base.pin.prefix == "nvidia/cuda_cccl", made.bug.name
