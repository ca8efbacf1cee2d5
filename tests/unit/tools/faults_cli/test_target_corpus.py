"""tools/faults_cli/target_corpus.py: bug B of corpus/flashinfer_comm.toml made
from the real releases, fetched (or from the repository's .targets cache)."""

from __future__ import annotations

import dataclasses
import difflib
import subprocess
from pathlib import Path

import pytest

from faults.corpus.releases import load_release_corpus
from tools.faults_cli.target_corpus import workspace
from tools.targets.registry import CACHE, FetchError

REPO = Path(__file__).parents[4]


def changes(before: str, after: str) -> list[tuple[list[str], list[str]]]:
    """Each changed block: the lines `before` had, the lines `after` has."""
    a, b = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def test_bug_b_undoes_exactly_its_hunks_on_the_base(tmp_path):
    corpus = load_release_corpus(REPO / "corpus/flashinfer_comm.toml", "B-.*")
    corpus = dataclasses.replace(corpus, harness=())  # the bug's file alone is under test
    (bug,) = corpus.bugs
    try:
        made, _ = workspace(corpus, bug, REPO, tmp_path / "ws", CACHE)
    except FetchError as error:
        if "cannot be reached" in str(error):
            pytest.skip(f"the registry cannot be reached: {error}")
        raise

    def show(ref: str, path: str) -> str:
        command = ["git", "-C", str(made.repo), "show", f"{ref}:{path}"]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout

    trees = CACHE / "trees"
    buggy = (trees / bug.buggy.file / bug.file).read_text()
    fixed = (trees / bug.fixed.file / bug.file).read_text()
    base, reverted = show(made.base, bug.file), show(made.head, bug.file)
    assert base == (trees / bug.base.file / bug.file).read_text()
    # The fix's every change, undone: base -> bug is fixed -> buggy (its only two hunks).
    assert bug.hunks == (1, 2)
    assert changes(base, reverted) == changes(fixed, buggy)
    assert any("st_flag_relaxed" in line for old, _ in changes(base, reverted) for line in old)
    changed = subprocess.run(
        ["git", "-C", str(made.repo), "diff", "--name-only", made.base, made.head],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert changed == [bug.file]
