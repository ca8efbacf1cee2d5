"""tools/targets/bug_workspace.py: bugs B, C and G of corpus/flashinfer_comm.toml
made from the real releases, fetched (or from the repository's .targets cache),
each base's sites as its review takes them (faults/corpus/bases.py)."""

from __future__ import annotations

import dataclasses
import difflib
import subprocess
from functools import partial
from pathlib import Path

import pytest

from faults.corpus.bases import base_sites
from faults.corpus.releases import load_release_corpus
from tools.targets.bug_workspace import workspace
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
    buggy = (trees / bug.buggy.pin.file / bug.file).read_text()
    fixed = (trees / bug.fixed.pin.file / bug.file).read_text()
    base, reverted = show(made, made.base, bug.file), show(made, made.head, bug.file)
    assert base == (trees / bug.base.pin.file / bug.file).read_text()
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
    # The mnnvl.* sites are anchored on 0.6.13's rewrite of the MNNVL header: none on 0.2.9.
    mnnvl = [
        (22, "oneshot.push", "at"), (23, "twoshot.scatter", "at"),
        (24, "twoshot.broadcast", "at"), (25, "lamport.cluster_arrive", "begin"),
        (26, "lamport.cta_arrive", "begin"), (27, "lamport.arrive_counter", "end"),
        (28, "lamport.counter_spin", "at"), (29, "oneshot.poll", "after"),
        (30, "lamport.chunk_poll", "after"), (31, "twoshot.poll", "after"),
        (32, "rmsnorm.poll", "after"),
    ]  # fmt: skip
    lacks_mnnvl = "".join(
        f"`target.site[{index}] (mnnvl.{name}): {key} found 0 times in"
        " trtllm_mnnvl_allreduce.cuh`, "
        for index, name, key in mnnvl
    )
    assert said.older == (
        "Judged by `catalogs/flashinfer_comm.toml`, the tree's own catalog refused "
        f"({REPO}/catalogs/flashinfer_comm.toml: target.site[1] (ar.barrier.backfill): "
        f"{lacks}); left out as naming sites the tree lacks: `target.site[1] "
        f"(ar.barrier.backfill): {lacks}`, `target.site[2] (ar.barrier.flag_release): "
        f"{lacks}`, `target.site[10] (ar.quant.group_absmax): {lacks}`, {lacks_mnnvl}`R1`, `R2`."
    )
    assert sorted(said.sites) == [
        "ar.barrier.flag_wait", "ar.lamport_comm.arrive", "ar.oneshot.clear", "ar.oneshot.poll",
        "ar.oneshot.push", "ar.sync_comm.arrive", "ar.twoshot.data_store",
        "ar.twoshot.sum_store",
        # trtllm_allreduce.cuh (a member since harness_ar.cu runs it): all of it on 0.2.9.
        "tar.block_barrier.release", "tar.block_barrier.wait", "tar.flag.st_flag_release",
        "tar.lamport.clear", "tar.lamport.poll", "tar.lamport.push",
        "tar.multi_gpu_barrier.release", "tar.multi_gpu_barrier.wait", "tar.oneshot.copy",
        "tar.twoshot.copy", "tar.twoshot.sum_store",
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
