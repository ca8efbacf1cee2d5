"""faults/review/carry.py: an anchored site's region carried through a
change's diff, from in-memory texts."""

from __future__ import annotations

from pathlib import Path

from faults.review.carry import as_declared, carried, carry_lines
from invariants.sync.sites import Anchor

BASE = "a\nb\nflag.store(1, release);\nc\nd\n"


def test_a_rewritten_line_keeps_its_place():
    new = "a\nb\nflag.exchange(1, release);\nc\nd\n"
    assert carry_lines(BASE, new, 3, 3) == (3, 3)


def test_lines_added_above_move_it_and_lines_added_inside_join_it():
    new = "x\ny\na\nb\nfence();\nflag.store(1, relaxed);\nc\nd\n"
    assert carry_lines(BASE, new, 3, 3) == (5, 6)  # the replacement, both of its lines
    assert carry_lines(BASE, "x\n" + BASE, 2, 4) == (3, 5)
    inside = "a\nb\nflag.store(1, release);\nmore();\nc\nd\n"
    assert carry_lines(BASE, inside, 3, 4) == (3, 5)


def test_a_region_deleted_whole_is_carried_nowhere():
    assert carry_lines(BASE, "a\nb\nc\nd\n", 3, 3) is None


def test_an_anchor_is_carried_only_where_its_text_is_gone(tmp_path):
    base, change = tmp_path / "base", tmp_path / "change"
    base.mkdir(), change.mkdir()
    (base / "m.cpp").write_text("void f() {\n  x = 1;\n  flag.store(1);\n}\n")
    (change / "m.cpp").write_text("void f() {\n  x = 1;\n  flag.exchange(1);\n}\n")
    found = Anchor("s.flag", "m.cpp", (("kind", "release"),), at="flag.store(")
    other = Anchor("s.x", "m.cpp", (("kind", "store"),), at="x = 1;")
    gone = Anchor("s.none", "m.cpp", (("kind", "store"),), at="nowhere(")
    kept = carried((found, other, gone), base, change)
    assert [a.lines for a in kept] == [(3, 3), None, None]
    assert as_declared(kept) == (found, other, gone)
    assert carried((found,), base, Path(tmp_path / "absent")) == (found,)


def test_adjacent_lines_rewritten_together_stay_apart():
    """flashinfer's end barrier: the release and the wait on adjacent lines,
    both weakened to volatile accesses in one hunk."""
    old = "a\nst_flag(f, v);\nwhile (ld_flag(f) == v) {\n}\n"
    new = "a\n*(volatile int*)f = v;\nwhile (*(volatile int*)f == v) {\n}\n"
    assert carry_lines(old, new, 2, 2) == (2, 2)
    assert carry_lines(old, new, 3, 4) == (3, 4)
