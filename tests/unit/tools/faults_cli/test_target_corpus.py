"""tools/faults_cli/target_corpus.py: bugs B, C and G of corpus/flashinfer_comm.toml
made from the real releases, fetched (or from the repository's .targets cache)."""

from __future__ import annotations

import dataclasses
import difflib
import subprocess
from pathlib import Path

import pytest

from functools import partial

from faults.corpus.releases import load_release_corpus
from tools.faults_cli.target_corpus import base_sites, workspace
from tools.targets.registry import CACHE, FetchError

REPO = Path(__file__).parents[4]


def changes(before: str, after: str) -> list[tuple[list[str], list[str]]]:
    """Each changed block: the lines `before` had, the lines `after` has."""
    a, b = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def made_bug(name: str, into: Path, harness: bool = False):
    """The corpus's bug `name` made in `into`, its base's sites (BaseSites)
    and the bug; skipped when the registry cannot be reached."""
    corpus = load_release_corpus(REPO / "corpus/flashinfer_comm.toml", f"{name}-.*")
    if not harness:  # the bug's file alone is under test
        corpus = dataclasses.replace(corpus, harness=())
    (bug,) = corpus.bugs
    on_base = partial(base_sites, corpus, bug, REPO / corpus.catalog)
    try:
        made, said = workspace(corpus, bug, REPO, into, CACHE, on_base)
    except FetchError as error:
        if "cannot be reached" in str(error):
            pytest.skip(f"the registry cannot be reached: {error}")
        raise
    return made, said, bug


def show(made, ref: str, path: str) -> str:
    command = ["git", "-C", str(made.repo), "show", f"{ref}:{path}"]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def test_bug_b_undoes_exactly_its_hunks_on_the_base(tmp_path):
    made, said, bug = made_bug("B", tmp_path / "ws")
    assert said.older == ""  # 0.7.4 is the catalog's pin: it loads there

    trees = CACHE / "trees"
    buggy = (trees / bug.buggy.file / bug.file).read_text()
    fixed = (trees / bug.fixed.file / bug.file).read_text()
    base, reverted = show(made, made.base, bug.file), show(made, made.head, bug.file)
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


def test_bug_c_on_a_base_the_catalog_does_not_load_is_judged_without_what_it_lacks(tmp_path):
    made, said, bug = made_bug("C", tmp_path / "ws", harness=True)
    lacks = "at found 0 times in trtllm_allreduce_fusion.cuh"
    assert said.older == (
        "Judged by `catalogs/flashinfer_comm.toml`, the tree's own catalog refused "
        f"({REPO}/catalogs/flashinfer_comm.toml: target.site[1] (ar.barrier.flag_release): "
        f"{lacks}); left out as naming sites the tree lacks: `target.site[1] "
        f"(ar.barrier.flag_release): {lacks}`, `target.site[9] (ar.quant.group_absmax): "
        f"{lacks}`, `R1`, `R2`."
    )
    assert sorted(said.sites) == [
        "ar.barrier.flag_wait", "ar.lamport_comm.arrive", "ar.oneshot.clear", "ar.oneshot.poll",
        "ar.oneshot.push", "ar.sync_comm.arrive", "ar.twoshot.data_store",
        "ar.twoshot.sum_store",
    ]
    assert made.older == ""  # the command sets it from `said`
    # The sdist's 3rdparty/spdlog/include lands where the harness's -I looks.
    assert (made.repo / "spdlog/include/spdlog/spdlog.h").is_file()
    base, reverted = show(made, made.base, bug.file), show(made, made.head, bug.file)
    # The counter arrive before the reads is back (twoshot and RMSNorm), LamportFlags unused.
    assert (base.count("flags."), reverted.count("flags.")) == (16, 0)
    arrive = "atomicAdd(offset_access_ptr, 1)"
    assert (base.count(arrive), reverted.count(arrive)) == (1, 3)
    assert reverted.count("LamportFlags") == base.count("LamportFlags") - 2


def test_bug_g_drops_only_the_device_sync_after_the_lamport_initialisation(tmp_path):
    made, said, bug = made_bug("G", tmp_path / "ws")
    assert (said.older, bug.base.version, bug.hunks) == ("", "0.7.4", (4,))
    base, reverted = show(made, made.base, bug.file), show(made, made.head, bug.file)
    assert changes(base, reverted) == [
        (["  cudaDeviceSynchronize();"], [""]),
        ([], ["  // todo(zihao): we can skip sycn with stream as below?",
              "  // cudaDeviceSynchronize();"]),
    ]
