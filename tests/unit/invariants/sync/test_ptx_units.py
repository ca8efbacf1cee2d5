"""PTX one translation unit at a time (invariants/sync/ptx_units.py): a
unit's dependencies read from its make-style list, its entry kept by their
digests and found again only while every one is as it was, and through
ptx_folder a change to one header recompiling only the units that read it;
a unit with no kernel left out of the index, a failing one named."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from invariants.sync import ptx_check
from invariants.sync.ptx_read import PtxError
from invariants.sync.ptx_units import UNIT_ENTRIES, cached_unit, dependencies, digests, keep_unit
from invariants.sync.spellings import ContractSpellings

# A compiler standing in for nvcc -ptx -MD: the unit's text and its includes'
# as PTX (an `.entry` where the unit says `kernel`), their list as its
# dependencies, and a line in compiles.log for every compile.
COMPILER = r"""
import pathlib, re, sys
unit, ptx, deps = map(pathlib.Path, sys.argv[1:4])
text = unit.read_text()
if "error" in text:
    sys.exit(f"{unit}(1): error: the unit says error")
read = [unit] + [unit.parent / name for name in re.findall(r'#include "(.+)"', text)]
body = "".join(path.read_text() for path in read)
ptx.write_text((".entry k\n" if "kernel" in body else "") + body)
deps.write_text(f"{ptx} : " + " \\\n  ".join(map(str, read)) + "\n")
with open(unit.parent / "compiles.log", "a") as log:
    log.write(unit.name + "\n")
"""


def test_a_dependency_list_names_tree_files_by_their_tree_path(tmp_path):
    tree = tmp_path / "tree"
    (tree / "inc").mkdir(parents=True)
    deps = tmp_path / "u.d"
    deps.write_text(f"{tmp_path}/u.ptx : {tree}/u.cu \\\n  {tree}/inc/a.h /usr/include/stdio.h \\\n"
                    f"  {tree}/inc/a.h\n")  # fmt: skip
    assert dependencies(deps, tree) == ["tree:u.cu", "tree:inc/a.h", "/usr/include/stdio.h"]


def test_an_entry_is_found_again_only_while_every_dependency_is_as_it_was(tmp_path):
    tree, folder = tmp_path / "tree", tmp_path / "cache"
    tree.mkdir()
    (tree / "a.h").write_text("one")
    (tmp_path / "made.ptx").write_text(".entry k")
    kept = digests(["tree:a.h"], tree)
    keep_unit(folder, tmp_path / "made.ptx", kept)
    assert cached_unit(folder, tree).read_text() == ".entry k"
    other = tmp_path / "other"  # another scratch tree with the same file: the same entry
    other.mkdir()
    (other / "a.h").write_text("one")
    assert cached_unit(folder, other) is not None
    (tree / "a.h").write_text("two")
    assert cached_unit(folder, tree) is None
    (tree / "a.h").unlink()
    assert digests(["tree:a.h"], tree) is None and cached_unit(folder, tree) is None


def test_a_unit_keeps_its_newest_entries_only(tmp_path):
    (tmp_path / "made.ptx").write_text("ptx")
    for n in range(UNIT_ENTRIES + 3):
        keep_unit(tmp_path / "cache", tmp_path / "made.ptx", {"tree:a.h": str(n)})
    assert len(list((tmp_path / "cache").glob("*.json"))) == UNIT_ENTRIES
    assert len(list((tmp_path / "cache").glob("*.ptx"))) == UNIT_ENTRIES


def unit_target(tmp_path: Path, units=("one.cu", "two.cu", "none.cu")):
    compiler = tmp_path / "compiler.py"
    compiler.write_text(COMPILER)
    spellings = ContractSpellings(
        ptx=(sys.executable, str(compiler), "{tree}/{unit}", "{ptx}", "{deps}"), ptx_units=units)
    return SimpleNamespace(name="t", sources="src", anchors=(), env={}, timeout_s=30.0,
                           contract=spellings)  # fmt: skip


def a_tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    for name, text in {"a.h": "a\n", "b.h": "b\n", "one.cu": '#include "a.h"\nkernel one\n',
                       "two.cu": '#include "b.h"\nkernel two\n', "none.cu": "host only\n"}.items():
        (root / name).write_text(text)  # fmt: skip
    return root


def compiled(root: Path) -> list[str]:
    log = root / "compiles.log"
    return sorted(log.read_text().split()) if log.is_file() else []


def test_a_header_change_recompiles_only_the_units_that_read_it(tmp_path):
    target, cache = unit_target(tmp_path), tmp_path / "cache"
    first = a_tree(tmp_path / "first")
    whole, cached = ptx_check.ptx_folder(first, first / "src", target, cache)
    assert not cached and compiled(first) == ["none.cu", "one.cu", "two.cu"]
    assert [label for label, _ in ptx_check.variants(whole)] == ["one.cu", "two.cu"]
    second = a_tree(tmp_path / "second")  # another tree: b.h changed, a.h as it was
    (second / "b.h").write_text("b changed\n")
    (second / "src" / "k.cu").write_text("a change to the sources: a new folder\n")
    folder, cached = ptx_check.ptx_folder(second, second / "src", target, cache)
    assert not cached and compiled(second) == ["two.cu"]
    assert (folder / "one.ptx").read_text() == '.entry k\n#include "a.h"\nkernel one\na\n'
    assert (folder / "two.ptx").read_text().endswith("b changed\n")
    assert sorted(p.name for p in cache.iterdir()) == sorted([whole.name, folder.name, "units"])


def test_a_failing_unit_is_named_with_the_compilers_error_and_leaves_no_folder(tmp_path):
    target, cache = unit_target(tmp_path), tmp_path / "cache"
    tree = a_tree(tmp_path / "tree")
    (tree / "two.cu").write_text("error\n")
    with pytest.raises(PtxError, match=r"on two.cu failed \(exit 1\): two.cu:1: the unit says error"):
        ptx_check.ptx_folder(tree, tree / "src", target, cache)
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".log")] == ["units"]
