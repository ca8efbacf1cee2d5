"""invariants.sync.sites.SourceTree: a tree's sources parsed once, each
file again only when it is written through the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

import invariants.sync.sites as sites_module
from invariants.sync.sites import Anchor, SourceTree, parse_tree

FIXTURE = Path(__file__).parents[4] / "tests/fixtures/flag_payload"

STORE = """\
// @site k.a.data kind=store
data[0] = 1;
// @end k.a.data
"""
RELEASE = """\
// @site k.a.flag kind=release producers=thread scope=gpu guards=k.a.data
st_release_gpu(flag, 1);
// @end k.a.flag
"""


@pytest.fixture
def parsed_paths(monkeypatch) -> list[Path]:
    """The path of each parse_file run, in order."""
    seen = []
    real = sites_module.parse_file

    def counted(path, **kwargs):
        seen.append(Path(path))
        return real(path, **kwargs)

    monkeypatch.setattr(sites_module, "parse_file", counted)
    return seen


def two_files(root: Path) -> tuple[Path, Path]:
    (root / "a.cuh").write_text(STORE)
    (root / "b.cuh").write_text(RELEASE)
    return root / "a.cuh", root / "b.cuh"


def test_its_sites_and_violations_are_parse_trees(tmp_path):
    two_files(tmp_path)
    (tmp_path / "c.cuh").write_text("// @site k.a.data kind=store\nx();\n// @end k.a.data\n")
    anchors = (Anchor("k.b.span", "b.cuh", (("kind", "compute"),), at="st_release_gpu(flag, 1);"),)
    tree = SourceTree(tmp_path, anchors)
    assert (tree.sites, tree.violations) == parse_tree(tmp_path, anchors)
    assert tree.violations  # k.a.data defined twice, the anchor inside a comment site


def test_each_file_is_parsed_once_however_often_it_is_asked(tmp_path, parsed_paths):
    a, b = two_files(tmp_path)
    tree = SourceTree(tmp_path)
    tree.sites, tree.violations, tree.guards(), tree.site("k.a.flag")
    assert parsed_paths == [a, b]


def test_a_write_parses_only_the_written_file_again(tmp_path, parsed_paths):
    a, b = two_files(tmp_path)
    tree = SourceTree(tmp_path)
    assert tree.site("k.a.flag").end == 3
    tree.write(b, "// padding\n" + RELEASE)
    assert b.read_text() == "// padding\n" + RELEASE
    assert tree.site("k.a.flag").end == 4
    assert parsed_paths == [a, b, b]
    assert tree.sites == parse_tree(tmp_path)[0]


def test_a_new_source_file_written_joins_the_tree_in_file_order(tmp_path):
    a, b = two_files(tmp_path)
    tree = SourceTree(tmp_path)
    assert [s.name for s in tree.sites] == ["k.a.data", "k.a.flag"]
    tree.write(tmp_path / "ab.cuh", "// @site k.ab.work kind=compute\nf();\n// @end k.ab.work\n")
    tree.write(tmp_path / "notes.txt", "// @site k.no.site kind=compute\n")  # no source
    assert [s.name for s in tree.sites] == ["k.a.data", "k.ab.work", "k.a.flag"]
    assert tree.sites == parse_tree(tmp_path)[0]


def test_a_site_missing_or_defined_twice_is_a_lookup_error(tmp_path):
    two_files(tmp_path)
    (tmp_path / "c.cuh").write_text(STORE)
    tree = SourceTree(tmp_path)
    with pytest.raises(LookupError, match=r"^site k\.gone is missing$"):
        tree.site("k.gone")
    with pytest.raises(LookupError, match=r"^site k\.a\.data is defined 2 times$"):
        tree.site("k.a.data")


def test_other_anchors_read_the_same_parse(tmp_path, parsed_paths):
    a, b = two_files(tmp_path)
    (tmp_path / "c.cuh").write_text("work();\n")
    anchors = (Anchor("k.c.work", "c.cuh", (("kind", "compute"),), at="work();"),)
    tree = SourceTree(tmp_path)
    anchored = tree.with_anchors(anchors)
    assert [s.name for s in anchored.sites] == ["k.a.data", "k.a.flag", "k.c.work"]
    assert [s.name for s in tree.sites] == ["k.a.data", "k.a.flag"]
    assert parsed_paths == [a, b, tmp_path / "c.cuh"]


def test_guards_name_each_site_and_the_site_it_guards():
    assert SourceTree(FIXTURE).guards() == {
        "fx.producer.payload_store": None,
        "fx.producer.flag_release": "fx.producer.payload_store",
        "fx.consumer.flag_wait": "fx.producer.payload_store",
        "fx.consumer.check": None,
    }
