"""[[target.site]] and [target.bound] read from a catalog: every malformed
table, and every anchor the target's tree does not hold as declared, is one
catalog error naming its key (faults/catalog/anchors.py, bound.py, refs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog
from tests.unit.faults.catalog.refused import REPO, refusal

FIXTURE = REPO / "tests/fixtures/flag_payload_anchored/catalog.toml"
TEXT = FIXTURE.read_text()
RELEASE = '''[[target.site]]
name = "fx.producer.flag_release"
file = "main.cpp"
at = "channel.flag.store("
'''
CHECK_END = 'end = "expected(round_idx, word_idx), got);\\n  }"\n'


def error(tmp_path: Path, old: str, new: str) -> str:
    return refusal(tmp_path, TEXT, old, new)


RELEASE_KEY = "target.site[1] (fx.producer.flag_release)"
CHECK_KEY = "target.site[3] (fx.consumer.check)"
AT = '"channel.flag.store("'
BEGIN = 'begin = "  for (int word_idx = 0; word_idx < kWords; ++word_idx) {\\n    const int got"\n'
IN_MAIN = 'file = "main.cpp"\nat = "channel.flag'
SCOPE = 'scope = "sys"\nguards = "fx.producer.payload_store"\n\n[[target.site]]  # a brace'
MALFORMED = {
    "an empty anchor": (
        RELEASE,
        RELEASE.replace(AT, '""'),
        f"{RELEASE_KEY}: at: a non-empty string, got ''",
    ),
    "an anchor not a string": (
        RELEASE,
        RELEASE.replace(AT, "3"),
        f"{RELEASE_KEY}: at: a non-empty string, got 3",
    ),
    "at with begin": (
        RELEASE,
        RELEASE + 'begin = "x"\n',
        f"{RELEASE_KEY}: at: give either at, or begin and end, not both",
    ),
    "end without begin": (BEGIN, "", f"{CHECK_KEY}: end: given without begin"),
    "begin without end": (CHECK_END, "", f"{CHECK_KEY}: begin: given without end"),
    "an unknown key": (
        RELEASE,
        RELEASE + 'colour = "red"\n',
        f"{RELEASE_KEY}: unknown keys ['colour']; known: name, file, begin, end, at, "
        "after, kind, producers, consumers, scope, guards",
    ),
    "a bad kind": (
        'kind = "release"',
        'kind = "publish"',
        f"{RELEASE_KEY}: kind=publish is not one of store, release, wait, compute",
    ),
    "a bad scope": (
        SCOPE,
        SCOPE.replace('"sys"', '"system"'),
        f"{RELEASE_KEY}: scope=system is not one of sys, gpu, cta",
    ),
    "a contract attribute of another kind": (
        'kind = "store"',
        'kind = "store"\nscope = "sys"',
        "target.site[0] (fx.producer.payload_store): scope= belongs to a release or a wait, "
        "not a store",
    ),
    "a release without its contract": (
        'producers = "thread"\n',
        "",
        f"{RELEASE_KEY}: a release must declare producers=, scope=, guards=; missing producers",
    ),
    "a name not dotted": (
        'name = "fx.producer.flag_release"',
        'name = "FlagRelease"',
        "target.site[1] (FlagRelease): name: 'FlagRelease' is not dotted lower_case "
        "(e.g. ar.oneshot.end_release)",
    ),
    "a name declared twice": (
        'name = "fx.consumer.check"',
        'name = "fx.producer.flag_release"',
        "target.site[3] (fx.producer.flag_release): name: declared already by target.site[1]",
    ),
    "a file outside the sources": (
        IN_MAIN,
        IN_MAIN.replace("main.cpp", "../main.cpp"),
        f"{RELEASE_KEY}: file: '../main.cpp' is not a path inside [target].sources",
    ),
    "a bound with no cond group": (
        "(?P<cond>.+)",
        "(.+)",
        "target.bound: loop: 'while\\\\s*\\\\((.+)\\\\)' has no group (?P<cond>...)",
    ),
    "a bound's unknown placeholder": (
        "site={site}",
        "site={name}",
        "target.bound: expired: unknown placeholder {name}; known: {site}, {limit_ns}",
    ),
    "a bound's limit": (
        "limit_ns = 2_000_000_000",
        "limit_ns = 0",
        "target.bound: limit_ns: a positive int (nanoseconds), got 0",
    ),
}


@pytest.mark.parametrize("old, new, message", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_table_is_one_line_naming_its_key(tmp_path, old, new, message):
    assert error(tmp_path, old, new) == message


SOURCES = "tests/fixtures/flag_payload_anchored"
UNHELD = {
    "an anchor not found": (
        AT,
        '"channel.flag.exchange("',
        f"{RELEASE_KEY}: at found 0 times in main.cpp",
    ),
    "an anchor found twice": (
        AT,
        '"round_idx + 1"',
        f"{RELEASE_KEY}: at found 2 times in main.cpp (lines 34, 40)",
    ),
    "end before begin": (
        BEGIN,
        'begin = "return mismatches;"\n',
        f"{CHECK_KEY}: end comes before begin in main.cpp (line 47, begin at line 49)",
    ),
    "a file that does not exist": (
        IN_MAIN,
        IN_MAIN.replace("main.cpp", "main.cu"),
        f"{RELEASE_KEY}: file main.cu does not exist in {REPO / SOURCES}",
    ),
    "two sites overlapping": (
        AT,
        '"channel.payload[word_idx] ="',
        f"{RELEASE_KEY}: overlaps site fx.producer.payload_store (lines 32-33) in main.cpp",
    ),
    "guards naming no site": (
        'guards = "fx.producer.payload_store"',
        'guards = "fx.producer.data"',
        f"{RELEASE_KEY}: site fx.producer.flag_release guards unknown site fx.producer.data",
    ),
}


@pytest.mark.parametrize("old, new, message", UNHELD.values(), ids=UNHELD.keys())
def test_an_anchor_the_tree_does_not_hold_is_a_catalog_error_at_load(tmp_path, old, new, message):
    assert error(tmp_path, old, new) == message


def test_a_site_declared_both_in_the_source_and_by_anchors_is_a_catalog_error(tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    main = (REPO / SOURCES / "main.cpp").read_text()
    store = "  channel.flag.store(round_idx + 1, std::memory_order_release);"
    name = "fx.producer.flag_release"
    annotated = f"  // @site {name} kind=store\n{store}\n  // @end {name}"
    (sources / "main.cpp").write_text(main.replace(store, annotated))
    path = tmp_path / "catalog.toml"
    path.write_text(TEXT.replace(f'sources = "{SOURCES}"', 'sources = "sources"'))
    with pytest.raises(CatalogError) as raised:
        load_catalog(path, tree_root=tmp_path)
    assert str(raised.value) == (
        f"{path}: {RELEASE_KEY}: declared in the source too ({sources / 'main.cpp'}:34)"
    )


def test_the_fixture_loads_with_its_anchors_and_bound():
    target = load_catalog(FIXTURE, tree_root=REPO).target
    assert [(a.name, a.file, a.at is not None) for a in target.anchors] == [
        ("fx.producer.payload_store", "main.cpp", True),
        ("fx.producer.flag_release", "main.cpp", True),
        ("fx.consumer.flag_wait", "main.cpp", True),
        ("fx.consumer.check", "main.cpp", False),
    ]
    assert target.anchors[1].attrs == (
        ("kind", "release"), ("producers", "thread"), ("scope", "sys"),
        ("guards", "fx.producer.payload_store"),
    )
    loop = r"while\s*\((?P<cond>.+)\)"
    assert (target.bound.limit_ns, target.bound.loop.pattern) == (2_000_000_000, loop)
