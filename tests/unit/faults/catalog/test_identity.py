"""[target.identity] (faults/catalog/identity.py): the statement written in,
where, with the digest; every malformed table, and a `before` the user's
tree does not hold on exactly one line, one catalog error naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.catalog.identity import Identity, identity_table

from tests.unit.faults.catalog.refused import REPO, refusal

FIXTURE = REPO / "tests/fixtures/own_test/catalog.toml"
TEXT = FIXTURE.read_text()
BEFORE = 'before = "const auto start = std::chrono::steady_clock::now();"\n'
SAY = 'say = \'static const int faults_identity = std::printf("\\"native_source_sha256\\": \\"{digest}\\"\\n"); (void)faults_identity;\'\n'
SAYS = Identity("f.h", "int b = 2;", 'std::printf("{digest}\\n");')


def test_the_statement_goes_before_its_line_at_its_indent_with_the_digest():
    text = "void f() {\n  int a = 1;\n    int b = 2;\n}\n"
    assert SAYS.written(text, "ab" * 32) == (
        "void f() {\n  int a = 1;\n"
        f'    std::printf("{"ab" * 32}\\n");  // AFDFAULT identity\n'
        "    int b = 2;\n}\n"
    )


@pytest.mark.parametrize("text, lines", [("int a = 1;\n", 0), ("int b = 2;\nint b = 2;\n", 2)])
def test_a_before_not_on_exactly_one_line_is_refused_saying_how_many(text, lines):
    with pytest.raises(ValueError, match=rf"^before 'int b = 2;' is on {lines} lines \(needs"):
        SAYS.written(text, "0" * 64)


def test_the_fixture_says_its_identity_as_the_catalog_reads_it():
    identity = load_catalog(FIXTURE, tree_root=REPO).target.identity
    assert (identity.file, identity.before) == ("ring.h", BEFORE.split('"')[1])
    assert identity.say.count("{digest}") == 1


def error(tmp_path: Path, old: str, new: str) -> str:
    return refusal(tmp_path, TEXT, old, new)


SOURCES = REPO / "tests/fixtures/own_test/ring"
MALFORMED = {
    "a key missing": (BEFORE, "", "target.identity: a table of file, before and say; got ['file', 'say']"),
    "an unknown key": (BEFORE, BEFORE + "after = 1\n", "target.identity: a table of file, before and say; got ['after', 'before', 'file', 'say']"),
    "an empty file": ('file = "ring.h"', 'file = ""', "target.identity: file: a non-empty string, got ''"),
    "no digest said": (SAY, "say = 'std::puts(\"x\");'\n", "target.identity: say: holds {digest} once, got 'std::puts(\"x\");'"),
    "a before of two lines": (BEFORE, 'before = "a\\nb"\n', "target.identity: before: text of one line, got 'a\\nb'"),
    "a before on no line": (BEFORE, 'before = "nowhere"\n', f"target.identity: before 'nowhere' is on 0 lines (needs exactly 1) of {SOURCES}/ring.h"),
    "a before on two lines": (BEFORE, 'before = "for (int slot = 0;"\n', f"target.identity: before 'for (int slot = 0;' is on 2 lines (needs exactly 1) of {SOURCES}/ring.h"),
    "a file the tree lacks": ('file = "ring.h"', 'file = "ring.hpp"', f"target.identity: file: cannot read {SOURCES}/ring.hpp: No such file or directory"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_identity_is_one_error_naming_its_key(tmp_path, case):
    old, new, said = MALFORMED[case]
    assert error(tmp_path, old, new) == said


def test_no_table_is_no_identity():
    assert identity_table(Path("c.toml"), None) is None
