"""The flashinfer comm target (catalogs/flashinfer_comm.toml, docs/targets.md)
on a workspace fetched from the registry once a session: its catalog loads,
its anchors resolve once each on the untouched 0.7.4 headers (the fusion
header's family, trtllm_allreduce.cuh's and trtllm_mnnvl_allreduce.cuh's, the
last held to the contract with no run), and our two harnesses build with a
generated skip of each family (both in one tree, built once a session: 30-60 s
alone on two cores); its publish contract holds on the clean tree, on the
source and in the PTX of our three translation units, and flags every
generated mutant of what it holds (weakened, narrowed) and our edits of the
MNNVL header, at the site, in three trees (no two mutants of a site or of a
function copy in one tree).
Skipped, with the reason, when the registry cannot be reached or nvcc is not here."""

from __future__ import annotations

import hashlib
import itertools
import os
import signal
import subprocess
from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.generate.site_faults import with_generated
from faults.operators import Family
from faults.pipeline.apply import apply_patches
from faults.pipeline.run import substitute
from faults.pipeline.scratch import target_scratch
from invariants.sync.contract import check_contracts
from invariants.sync.sites import parse_tree
from tools.faults_cli.main import main as faults_main
from tests.unit.tools.targets.workspaces import faults_contract, fetched, generated, needs_nvcc
from tools.targets.registry import CACHE

# One worker takes the whole module under -n (pyproject's --dist loadgroup):
# its builds and PTX compiles are made once, not once a worker.
pytestmark = pytest.mark.xdist_group("flashinfer_comm")

ROOT = Path(__file__).resolve().parents[4]
CATALOG = ROOT / "catalogs" / "flashinfer_comm.toml"
HEADER = "include/flashinfer/comm/trtllm_allreduce_fusion.cuh"
HEADER_SHA256 = "9f5529d444072b5a373d244001dcf2fb272362c2562471b5097287a4c7b8bb70"
AR_HEADER = "include/flashinfer/comm/trtllm_allreduce.cuh"  # harness_ar.cu's, sites tar.*
AR_HEADER_SHA256 = "1aba1b25a72c1f6073b3d08fb6e23b355bb4b42250e2b4c1c55a3c225896735d"
MNNVL_HEADER = "include/flashinfer/comm/trtllm_mnnvl_allreduce.cuh"  # mnnvl_ptx.cu's, sites mnnvl.*
MNNVL_HEADER_SHA256 = "94d7b3b123493c6114a433618c3d24fbeb7c3a0a8f325598a74d7eaa0ed72afa"
SITES = {
    "ar.twoshot.data_store": ("store", "reinterpret_cast<float4*>(comm.comm_bufs[params.rank])"),
    "ar.barrier.backfill": ("store", "for (int flag_idx = blockIdx.x + gridDim.x;"),
    "ar.barrier.flag_release": ("release", "st_flag(m_target_flag + blockIdx.x * NRanks,"),
    "ar.barrier.flag_wait": ("wait", "while (ld_flag(m_current_flag) == prev_flag("),
    "ar.twoshot.sum_store": ("store", "sum_val.store(reinterpret_cast<T*>(comm.comm_bufs[r])"),
    "ar.sync_comm.arrive": ("store", "if (threadIdx.x == 0) {"),
    "ar.lamport_comm.arrive": ("store", "if (threadIdx.x == 0) {"),
    "ar.quant.group_absmax": ("compute", "atomicMax(&smem_group_absmax[local_group]"),
    "ar.oneshot.push": ("store", "val.store(reinterpret_cast<T*>(comm.data_bufs[r]) +"),
    "ar.oneshot.clear": ("store", "clear_vec.store(reinterpret_cast<T*>(comm.clear_buf)"),
    "ar.oneshot.poll": ("compute", "while (!done) {"),
}
AR_SITES = {
    "tar.flag.st_flag_release": ("compute", "#if __CUDA_ARCH__ >= 700"),
    "tar.multi_gpu_barrier.release": ("release", "st_flag_release(flag, signals[tidx] + offset"),
    "tar.multi_gpu_barrier.wait": ("wait", "while (ld_flag_acquire(peer_barrier_d) != flag) {"),
    "tar.block_barrier.release": ("release", "st_flag_release(flag, signals[tidx] + flag_block_"),
    "tar.block_barrier.wait": ("wait", "while (ld_flag_acquire(peer_barrier_d) != flag) {"),
    "tar.lamport.push": ("store", "for (int ii = 1; ii < RanksPerNode; ++ii) {"),
    "tar.lamport.clear": ("store", "for (int ii = 1; ii < RanksPerNode; ++ii) {"),
    "tar.lamport.poll": ("compute", "while (!done) {"),
    "tar.oneshot.copy": ("store", "for (size_t iter_offset = chunk_start; iter_offset < chunk"),
    "tar.twoshot.copy": ("store", "for (size_t local_offset = chunk_start; local_offset < chunk"),
    "tar.twoshot.sum_store": ("store", "if constexpr (PUSH_MODE) {"),
}
# trtllm_mnnvl_allreduce.cuh's sync points: no harness runs them (no config),
# held to the site rule and the contract on mnnvl_ptx.cu's PTX.
MNNVL_SITES = {
    "mnnvl.oneshot.push": ("store", "reinterpret_cast<PackedType*>("),
    "mnnvl.twoshot.scatter": ("store", "reinterpret_cast<PackedType*>(&scatterBufDest["),
    "mnnvl.twoshot.broadcast": ("store", "reinterpret_cast<PackedType*>(&broadcastBufW["),
    "mnnvl.lamport.cluster_arrive": ("release", "__cluster_barrier_arrive();"),
    "mnnvl.lamport.cta_arrive": ("release", "if (threadIdx.x < 32) {"),
    "mnnvl.lamport.arrive_counter": ("compute", "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__"),
    "mnnvl.lamport.counter_spin": ("compute", "while (*reinterpret_cast<uint32_t volatile*>(mFlag"),
    "mnnvl.oneshot.poll": ("compute", "while (1) {"),
    "mnnvl.lamport.chunk_poll": ("compute", "while (1) {"),
    "mnnvl.twoshot.poll": ("compute", "while (isLamportDirty(loaded)) {"),
    "mnnvl.rmsnorm.poll": ("compute", "while (isLamportDirty(loaded)) {"),
}
# Each anchored site's last line, where its first repeats in the file: the
# statement the anchor (and `after`) picked, not another of the same start.
AR_LAST_LINES = {
    "tar.flag.st_flag_release": "#endif",
    "tar.lamport.push": "}",
    "tar.lamport.clear": "}",
    "tar.multi_gpu_barrier.wait": "}",
    "tar.block_barrier.wait": "}",
    "mnnvl.lamport.cluster_arrive": "return;",
    "mnnvl.lamport.arrive_counter": "#endif",
}


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    return fetched("flashinfer_comm", tmp_path_factory.mktemp("flashinfer") / "ws")


def test_the_fetched_headers_are_the_released_ones_untouched(workspace):
    pinned = ((HEADER, HEADER_SHA256), (AR_HEADER, AR_HEADER_SHA256),
              (MNNVL_HEADER, MNNVL_HEADER_SHA256))
    for header, sha256 in pinned:
        assert hashlib.sha256((workspace / header).read_bytes()).hexdigest() == sha256, header
    names = sorted(p.name for p in (workspace / "include/flashinfer/comm").iterdir())
    # no vLLM all-reduce, nothing else
    assert names == ["trtllm_allreduce.cuh", "trtllm_allreduce_fusion.cuh",
                     "trtllm_mnnvl_allreduce.cuh"]
    harnesses = sorted(p.name for p in (workspace / "harness").iterdir())
    assert harnesses == ["harness.cu", "harness_ar.cu", "mnnvl_ptx.cu"]


def test_every_anchor_resolves_once_to_its_statement(workspace):
    catalog = load_catalog(CATALOG, tree_root=workspace)
    sources = workspace / catalog.target.sources
    sites, violations = parse_tree(sources, catalog.target.anchors)
    assert violations == []
    expected = {**SITES, **AR_SITES, **MNNVL_SITES}
    assert {site.name: site.kind for site in sites} == {n: k for n, (k, _) in expected.items()}
    for site in sites:
        assert site.anchored
        lines = site.path.read_text().splitlines()
        assert lines[site.lines.start - 1].strip().startswith(expected[site.name][1]), site.name
        if site.name in AR_LAST_LINES:
            assert lines[site.lines.stop - 2].strip() == AR_LAST_LINES[site.name], site.name
    by_file = {site.name: site.path.name for site in sites}
    assert {by_file[name] for name in AR_SITES} == {"trtllm_allreduce.cuh"}
    assert {by_file[name] for name in SITES} == {"trtllm_allreduce_fusion.cuh"}
    assert {by_file[name] for name in MNNVL_SITES} == {"trtllm_mnnvl_allreduce.cuh"}
    # The two waits of trtllm_allreduce.cuh open with the same line: `after` told them apart.
    starts = {site.name: site.lines.start for site in sites}
    assert starts["tar.multi_gpu_barrier.wait"] < starts["tar.block_barrier.release"]
    assert starts["tar.block_barrier.release"] < starts["tar.block_barrier.wait"]
    assert starts["tar.lamport.push"] < starts["tar.lamport.clear"] < starts["tar.lamport.poll"]
    assert starts["mnnvl.oneshot.poll"] < starts["mnnvl.lamport.chunk_poll"]
    assert starts["mnnvl.twoshot.poll"] < starts["mnnvl.rmsnorm.poll"]


def test_sites_check_holds_every_rule_on_the_untouched_headers(workspace, capsys):
    """The site rule (every ordering primitive of both headers inside a site:
    the fusion Barrier's backfill, st_flag_release()'s pre-sm_70 fence) and
    the contract on the source; the PTX's is below."""
    comm = workspace / "include/flashinfer/comm"
    argv = ["--root", str(workspace), "--catalog", str(CATALOG), "sites", "--check", str(comm),
            "--no-ptx"]
    assert faults_main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "contract of 8 releases and waits (source only): ok",
        f"{len(SITES) + len(AR_SITES) + len(MNNVL_SITES)} sites in {comm}: ok",
    ]


def test_the_catalog_runs_every_config_as_logical_ranks(workspace):
    catalog = load_catalog(CATALOG, tree_root=workspace)
    fusion = [(f"{k}-{ranks}", ranks) for k in ("twoshot", "oneshot") for ranks in (2, 4, 8)]
    ar = [
        ("tar-lamport-2", 2), ("tar-lamport-4", 4), ("tar-lamport-8", 8),
        ("tar-oneshot-copy-2", 2), ("tar-oneshot-push-4", 4), ("tar-oneshot-memcpy-8", 8),
        ("tar-twoshot-copy-8", 8), ("tar-twoshot-push-2", 2), ("tar-twoshot-memcpy-4", 4),
    ]  # fmt: skip
    assert [(c.name, c.gpus) for c in catalog.configs] == fusion + ar
    # A config's first argument names the binary the run command executes.
    for config in catalog.configs:
        family = config.name.removeprefix("tar-").split("-")[0]
        binary = "harness_ar" if config.name.startswith("tar-") else "harness"
        assert tuple(config.args[:3]) == (binary, "--kernel", family), config.name
    assert catalog.auto_rank_mode(1).value == "logical"


def test_the_run_command_runs_the_binary_a_config_names(workspace, tmp_path):
    """The run command is `sh -c`: its first argument after the script is the
    binary under {out}, the rest go to it after --ranks and --timeout-s."""
    catalog = load_catalog(CATALOG, tree_root=workspace)
    (tmp_path / "harness_ar").write_text('#!/bin/sh\necho "$0 $*"\n')
    (tmp_path / "harness_ar").chmod(0o755)
    config = next(c for c in catalog.configs if c.name == "tar-lamport-4")
    words = substitute(catalog.target.run + config.args, tree=str(workspace), out=str(tmp_path),
                       python="python3", digest="0" * 64, gpus="4", ranks="4")
    said = subprocess.run(words, capture_output=True, text=True, check=True).stdout.split()
    binary = str(tmp_path / "harness_ar")
    assert said == [binary, "--ranks", "4", "--timeout-s", "30", *config.args[1:]]
    assert catalog.target.logical_run == catalog.target.run


def test_no_tree_of_the_cache_holds_vllms_all_reduce(workspace):
    """vLLM's custom all-reduce, in any copy, is held for an independent check:
    neither it nor ulysses (built on it) is ever unpacked (docs/targets.md)."""
    held = [p for folder in (CACHE / "trees", workspace) for p in folder.rglob("*")
            if "vllm" in p.name.lower() or "ulysses" in p.name.lower()]
    assert held == []


# Per fault: its header, and whether its tree keeps the wait's loop, bounded
# (a skip removes it; a delay keeps it), and the Lamport poll that spins too.
FAULTS = {
    "gen.skip.ar.barrier.flag_wait": (HEADER, "ar.barrier.flag_wait", False, "ar.oneshot.poll"),
    "gen.delay.ar.oneshot.push": (HEADER, "ar.barrier.flag_wait", True, "ar.oneshot.poll"),
    "gen.skip.tar.block_barrier.wait": (
        AR_HEADER, "tar.block_barrier.wait", False, "tar.lamport.poll"),
}
# The faults built as well, in one tree: a skip of each family (a tree holds a
# skip and the delay of the store its wait guards, both headers bounded). Each
# harness includes one header, so each compiles what a tree of its fault alone
# would give it. The delay's tree is applied and read, not built: its code is
# the delay the skips' tree builds.
BUILT = ("gen.skip.ar.barrier.flag_wait", "gen.skip.tar.block_barrier.wait")


def applied(workspace: Path, fault: str, tree: Path) -> Path:
    argv = ["--root", str(workspace), "--catalog", str(CATALOG), "apply", fault,
            "--out", str(tree)]
    assert faults_main(argv) == 0, fault
    return tree


def build(tree: Path, out: Path) -> subprocess.Popen:
    catalog = load_catalog(CATALOG)
    words = substitute(catalog.target.build, tree=str(tree), out=str(out), python="python3",
                       digest="0" * 64, gpus="2", ranks="2")
    out.mkdir(parents=True, exist_ok=True)
    # A session of its own: the build is `sh -c` running two nvcc side by side,
    # ended as a group if it must be.
    return subprocess.Popen(words, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.fixture(scope="session")
def skips_built(workspace, tmp_path_factory) -> tuple[Path, Path, int, str]:
    """The tree of both families' skips, applied and built by the catalog's
    build (both harnesses side by side): the tree, the build's folder, its
    exit code and the end of what it said. The clean tree is not built on its
    own: this one is it with a skip in each harness's header."""
    needs_nvcc()
    scratch = tmp_path_factory.mktemp("builds")
    catalog = generated(CATALOG, workspace)
    tree = scratch / "skips" / "tree"
    sources = target_scratch(workspace, tree, catalog.target)
    apply_patches(sources, catalog, [p for fault in BUILT for p in catalog.all_patches(fault)])
    child = build(tree, scratch / "out")
    try:
        _, said = child.communicate(timeout=600)
    finally:  # a timeout leaves no nvcc running past the session
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    return tree, scratch / "out", child.returncode, said[-2000:]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_generated_fault_applies_and_bounds_the_spins_it_keeps(workspace, tmp_path, fault):
    header, wait, bounded, poll = FAULTS[fault]
    text = (applied(workspace, fault, tmp_path / "tree") / header).read_text()
    assert f"AFDFAULT {fault} rank=%d" in text
    assert (f"faults timeout: site={wait}" in text) == bounded
    assert f"faults timeout: site={poll}" in text  # the Lamport poll spins too


def test_both_harnesses_build_with_the_skips_of_both_families_in_one_tree(skips_built):
    tree, out, code, said = skips_built
    for fault in BUILT:
        text = (tree / FAULTS[fault][0]).read_text()
        assert f"AFDFAULT {fault} delay 200000 ns at start of" in text
        assert f"AFDFAULT {fault} rank=%d" in text
    assert code == 0, said
    assert (out / "harness").is_file()
    assert (out / "harness_ar").is_file()


def test_the_ar_skip_delays_the_store_its_wait_guards_and_bounds_the_other_spins(
    workspace, tmp_path
):
    tree = applied(workspace, "gen.skip.tar.block_barrier.wait", tmp_path / "tree")
    text = (tree / AR_HEADER).read_text()
    held = "AFDFAULT gen.skip.tar.block_barrier.wait delay 200000 ns at start of tar.oneshot.copy"
    assert held in text
    assert "faults timeout: site=tar.multi_gpu_barrier.wait" in text
    fusion = (tree / HEADER).read_text()  # the other family's header: bounded, not patched
    assert "AFDFAULT gen.skip.tar.block_barrier.wait" not in fusion
    assert "faults timeout: site=ar.barrier.flag_wait" in fusion


# ------------------------------------------------------- the publish contract
# Every generated fault that weakens what the contract holds, and what the
# contract says of its tree: the source finding, then the PTX's (the
# translation unit of the harness that runs the site's kernels: harness.cu's
# six, harness_ar.cu's 42).
CONTRACT_FAMILIES = {Family.WEAKEN_RELEASE, Family.WEAKEN_ACQUIRE, Family.NARROW_SCOPE,
                     Family.REMOVE_BARRIER, Family.REMOVE_FENCE, Family.REMOVE_WARP_SYNC}
RELEASE, WAIT = "ar.barrier.flag_release", "ar.barrier.flag_wait"
NO_ACQUIRE_SOURCE = ("no acquire at scope sys: no ld_flag|ld_flag_acquire, nor a load then"
                     " fence.sys (the catalog spells none)")
NO_ACQUIRE_PTX = ("no ld.acquire.sys in the wait (nor a call that acquires, nor a relaxed load"
                  " then fence.acq_rel.sys)")
NO_ACQUIRE = [(WAIT, None, NO_ACQUIRE_SOURCE), (WAIT, "harness.cu", NO_ACQUIRE_PTX)]


def weakened(site: str, publish: str, ptx: bool = True) -> list:
    """A release made relaxed or volatile: said on the source, and in the PTX."""
    said = [(site, None, f"publish {publish} is no release at scope sys and no fence.sys (the"
             " catalog spells none) precedes it")]  # fmt: skip
    in_ptx = (site, "harness_ar.cu", "publish is st.relaxed.sys: no release at scope sys")
    return said + [in_ptx] * ptx


def narrowed(site: str, what: str) -> list:
    if what == "release":
        return [
            (site, None, "publish st_flag_release_gpu is no release at scope sys: it releases"
             " at a narrower scope"),
            (site, "harness_ar.cu", "publish is st.release.gpu: no release at scope sys"),
        ]  # fmt: skip
    return [(site, None, "acquire ld_flag_acquire_gpu is no acquire at scope sys"),
            (site, "harness_ar.cu", "the wait acquires below scope sys")]  # fmt: skip


BLOCK_RELEASE, BLOCK_WAIT = "tar.block_barrier.release", "tar.block_barrier.wait"
GPU_RELEASE, GPU_WAIT = "tar.multi_gpu_barrier.release", "tar.multi_gpu_barrier.wait"
MUTANTS = {
    "gen.weaken-release.ar.barrier.flag_release.1": [
        (RELEASE, None, "publish st_flag_relaxed is no release at scope sys and no fence.sys"
         " (the catalog spells none) precedes it"),
        (RELEASE, "harness.cu", "publish is st.relaxed.sys: no release at scope sys"),
    ],
    "gen.weaken-release.ar.barrier.flag_release.2": [
        (RELEASE, None, "publish st_flag_volatile is no release at scope sys and no fence.sys"
         " (the catalog spells none) precedes it"),
        (RELEASE, "harness.cu", "publish is st.relaxed.sys: no release at scope sys"),
    ],
    "gen.weaken-acquire.ar.barrier.flag_wait.1": NO_ACQUIRE,
    "gen.weaken-acquire.ar.barrier.flag_wait.2": NO_ACQUIRE,
    "gen.narrow-scope.ar.barrier.flag_release": [
        (RELEASE, None, "publish st_flag_gpu is no release at scope sys: it releases at a"
         " narrower scope"),
        (RELEASE, "harness.cu", "publish is st.release.gpu: no release at scope sys"),
    ],
    "gen.narrow-scope.ar.barrier.flag_wait": [
        (WAIT, None, "acquire ld_flag_gpu is no acquire at scope sys"),
        (WAIT, "harness.cu", "the wait acquires below scope sys"),
    ],
    # trtllm_allreduce.cuh's barriers, in harness_ar.cu's PTX.
    "gen.weaken-release.tar.block_barrier.release.1": weakened(
        BLOCK_RELEASE, "st_flag_release_relaxed"),
    "gen.weaken-release.tar.block_barrier.release.2": weakened(
        BLOCK_RELEASE, "st_flag_release_volatile"),
    # multi_gpu_barrier() runs in the memcpy mode only, where the kernel stores
    # nothing before the release (the stream copied the input before it): the
    # PTX rule asks a fence only between the kernel's own stores and a relaxed
    # publish, so the relaxed one passes there; the source rule names it.
    "gen.weaken-release.tar.multi_gpu_barrier.release.1": weakened(
        GPU_RELEASE, "st_flag_release_relaxed", ptx=False),
    "gen.weaken-release.tar.multi_gpu_barrier.release.2": weakened(
        GPU_RELEASE, "st_flag_release_volatile", ptx=False),
    "gen.weaken-acquire.tar.block_barrier.wait.1": [
        (BLOCK_WAIT, None, NO_ACQUIRE_SOURCE), (BLOCK_WAIT, "harness_ar.cu", NO_ACQUIRE_PTX)],
    "gen.weaken-acquire.tar.block_barrier.wait.2": [
        (BLOCK_WAIT, None, NO_ACQUIRE_SOURCE), (BLOCK_WAIT, "harness_ar.cu", NO_ACQUIRE_PTX)],
    "gen.weaken-acquire.tar.multi_gpu_barrier.wait.1": [
        (GPU_WAIT, None, NO_ACQUIRE_SOURCE), (GPU_WAIT, "harness_ar.cu", NO_ACQUIRE_PTX)],
    "gen.weaken-acquire.tar.multi_gpu_barrier.wait.2": [
        (GPU_WAIT, None, NO_ACQUIRE_SOURCE), (GPU_WAIT, "harness_ar.cu", NO_ACQUIRE_PTX)],
    "gen.narrow-scope.tar.block_barrier.release": narrowed(BLOCK_RELEASE, "release"),
    "gen.narrow-scope.tar.block_barrier.wait": narrowed(BLOCK_WAIT, "wait"),
    "gen.narrow-scope.tar.multi_gpu_barrier.release": narrowed(GPU_RELEASE, "release"),
    "gen.narrow-scope.tar.multi_gpu_barrier.wait": narrowed(GPU_WAIT, "wait"),
}  # fmt: skip


@pytest.fixture(scope="module")
def ptx_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("flashinfer-ptx")


def test_the_clean_tree_keeps_the_contract_on_the_source(workspace):
    target = load_catalog(CATALOG, tree_root=workspace).target
    report = check_contracts(workspace, target, ptx=False)
    assert (report.sites_checked, report.violations) == (8, [])


def test_the_clean_tree_keeps_the_contract_in_the_ptx(workspace, ptx_cache, tmp_path):
    needs_nvcc()
    target = load_catalog(CATALOG, tree_root=workspace).target
    report = check_contracts(workspace, target, cache=ptx_cache)
    assert (report.sites_checked, report.variants_checked, report.violations) == (8, 3, [])
    scratch = tmp_path / "tree"
    target_scratch(workspace, scratch, target)  # as a sweep's tree reads
    report = check_contracts(scratch, target.annotated(), cache=ptx_cache)
    assert (report.sites_checked, report.variants_checked, report.violations) == (8, 3, [])


def test_no_fault_is_generated_from_code_no_config_runs(workspace):
    """[generate.not_run]: the MNNVL sites make no fault (nothing would fire
    it); every other store, release and compute site still makes its delay."""
    catalog = with_generated(load_catalog(CATALOG, tree_root=workspace), workspace)
    named = {p.site for f in catalog.faults.values() for p in catalog.all_patches(f.id)}
    assert [f for f in catalog.faults if ".mnnvl." in f] == []
    assert {site for site in named if site and site.startswith("mnnvl.")} == set()
    for name, (kind, _) in {**SITES, **AR_SITES}.items():
        assert kind == "wait" or f"gen.delay.{name}" in catalog.faults, name


def test_every_contract_mutant_is_one_listed_here(workspace):
    catalog = with_generated(load_catalog(CATALOG, tree_root=workspace), workspace)
    found = sorted(i for i, f in catalog.faults.items() if f.family in CONTRACT_FAMILIES)
    assert found == sorted(MUTANTS)


def site_of(name: str) -> str:
    """The site a generated fault's id names (`gen.<family>.<site>[.<n>]`),
    an edit's (`edit:<name>`, of the MNNVL header: its cluster arrival), or
    a finding's site itself."""
    if name.startswith("edit:"):
        return "mnnvl.lamport.cluster_arrive"
    if not name.startswith("gen."):
        return name
    site = name.removeprefix("gen.").split(".", 1)[1]
    return site.rsplit(".", 1)[0] if site.rsplit(".", 1)[-1].isdigit() else site


# Our edits of the MNNVL header, each a bug class the contract finds on code no
# harness runs: (old, new), and what the source and the PTX say at the site.
# The cluster barrier's wait made by block rank 0's first warp alone (as
# 0.6.15 had it, corpus bug E): the arrival no longer follows a barrier of the
# whole block.
CLUSTER_WAIT = "      __cluster_barrier_arrive();\n      __cluster_barrier_wait();\n"
CLUSTER_WAIT_IF = "      if (cluster.block_rank() == 0 && threadIdx.x < 32) {\n"
EDITS = {
    "edit:cluster-wait-by-some": (
        (CLUSTER_WAIT + CLUSTER_WAIT_IF,
         "      __cluster_barrier_arrive();\n" + CLUSTER_WAIT_IF
         + "        __cluster_barrier_wait();\n"),
        ("no __syncthreads|__cluster_barrier_wait before the publish arriveCounter: the"
         " __cluster_barrier_wait at line", "is under `if (cluster.block_rank() == 0 &&"
         " threadIdx.x < 32)`, which differs per thread"),
        ("no bar.sync between the block's stores and red.release.gpu on every path: the"
         " barrier.cluster.wait at line", "on %tid.x, which differs per thread"),
    ),
}  # fmt: skip


# The mutants' trees, as few as hold every mutant once: a tree holds no two
# mutants of one site (a finding is said at its site, so a tree's findings
# part by site, each mutant's its own) and no two that write one twin (the
# n-th rewrite of one family in one header copies the same primitive under
# the same name). One PTX compile (every harness) checks a whole tree.
def twin_of(name: str) -> tuple[str, ...]:
    """The function copy a mutant writes, as its id tells it: (family, the
    rewrite's number, the header's family, release or wait); an edit writes none."""
    if name.startswith("edit:"):
        return (name,)
    family, site = name.removeprefix("gen.").split(".", 1)
    number = site.rsplit(".", 1)[-1] if site.rsplit(".", 1)[-1].isdigit() else ""
    return (family, number, site.split(".")[0], site_of(name).rsplit(".", 1)[-1])


def apart(one: str, other: str) -> bool:
    return site_of(one) != site_of(other) and twin_of(one) != twin_of(other)


def trees_by_site(names) -> list[tuple[str, ...]]:
    """The fewest trees holding each of `names` once, no tree two not `apart`."""

    def place(left: list[str], trees: list[list[str]]) -> bool:
        if not left:
            return True
        for tree in trees:
            if all(apart(left[0], other) for other in tree):
                tree.append(left[0])
                if place(left[1:], trees):
                    return True
                tree.pop()
        return False

    for count in itertools.count(1):
        trees: list[list[str]] = [[] for _ in range(count)]
        if place(sorted(names), trees):
            return [tuple(tree) for tree in trees]
    raise AssertionError("unreachable")


MUTANT_TREES = trees_by_site([*MUTANTS, *EDITS])


@pytest.fixture(scope="module")
def mutant_tree(workspace, ptx_cache, tmp_path_factory):
    """A mutant's tree's contract report, its sites and the faults it holds,
    each tree made and checked once, when a test first asks for it."""
    made, catalog = {}, generated(CATALOG, workspace)

    def tree_of(fault: str):
        held = next(held for held in MUTANT_TREES if fault in held)
        if held not in made:
            tree = tmp_path_factory.mktemp("mutant") / "tree"
            faults = [f for f in held if f not in EDITS]
            edits = [(MNNVL_HEADER, *EDITS[e][0]) for e in held if e in EDITS]
            report, sites = faults_contract(catalog, workspace, tree, faults, ptx_cache, edits)
            made[held] = (report, sites, held)
        return made[held]

    return tree_of


def test_each_mutant_has_a_tree_and_shares_it_only_with_other_sites_mutants():
    held = [fault for faults in MUTANT_TREES for fault in faults]
    assert sorted(held) == sorted([*MUTANTS, *EDITS])
    assert all(len({site_of(f) for f in faults}) == len(faults) for faults in MUTANT_TREES)
    assert len(MUTANT_TREES) == 3  # three mutants at every site of the catalog


@pytest.mark.parametrize("fault", sorted(MUTANTS))
def test_the_contract_flags_each_mutant_at_its_site(mutant_tree, fault):
    needs_nvcc()
    report, sites, faults = mutant_tree(fault)
    own = [v for v in report.violations if v.site == site_of(fault)]
    assert [(v.site, v.variant, v.message) for v in own] == MUTANTS[fault]
    assert all(v.line in sites[v.site].lines for v in report.violations)
    # Every finding of the tree is a mutant's own: at this one's site or another's of the tree.
    assert {v.site for v in report.violations} <= {site_of(f) for f in faults}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_the_contract_flags_each_edit_of_the_mnnvl_header_at_its_site(mutant_tree, edit):
    """Code no harness runs, held to the contract on the source and on our
    mnnvl_ptx.cu's PTX: each edit is flagged at mnnvl.lamport.cluster_arrive,
    once on each."""
    needs_nvcc()
    report, sites, _ = mutant_tree(edit)
    _, source, ptx = EDITS[edit]
    own = [v for v in report.violations if v.site == site_of(edit)]
    said = [(v.site, v.variant) for v in own]
    assert said == [("mnnvl.lamport.cluster_arrive", None),
                    ("mnnvl.lamport.cluster_arrive", "mnnvl_ptx.cu")], [str(v) for v in own]
    for violation, words in zip(own, (source, ptx), strict=True):
        assert all(part in violation.message for part in words), violation.message
        assert violation.line in sites[violation.site].lines


# ------------------------------------------------------- the guarded data
# Our edits of the fetched header, each a bug of one class the data rules
# find (docs/synchronization.md, "The guarded data"): the two-shot kernel's
# peer rows, whose pointers it keeps in a local array (comm_bufs[r]), read on
# the read-only path, read above the barrier's wait, and waited for only by
# block 0's threads. Each is its (old, new) edits of the header and what the
# finding at the wait says.
PEER_READ = "      vals[r].load(reinterpret_cast<T*>(comm.comm_bufs[r]) + idx * VEC_SIZE);\n"
FIRST_SYNC = "  Barrier<NRanks> barrier(params.rank, comm);\n  barrier.sync();\n  int comm_access_id"
SECOND_SYNC = "  barrier.sync();\n#pragma unroll\n  for (int r = 0; r < NRanks; ++r) {\n    int comm_access_id"
WHO_WAITS = "    __syncthreads();\n    if (threadIdx.x < NRanks) {\n      m_flag_value"
DATA_BUGS = {
    "non-coherent-read": (
        [(PEER_READ, "      *reinterpret_cast<float4*>(&vals[r]) = __ldg(\n"
          "          reinterpret_cast<const float4*>(comm.comm_bufs[r]) + idx);\n")],
        "the read-only path is not coherent with a peer's stores",
    ),
    "read-above-wait": (
        [(FIRST_SYNC, FIRST_SYNC.replace("  barrier.sync();\n", "")),
         (SECOND_SYNC, "  barrier.sync();\n" + SECOND_SYNC)],
        "before any acquire of its wait in the iteration (a load above the wait)",
    ),
    "wait-by-some": (
        [(WHO_WAITS, WHO_WAITS.replace("< NRanks)", "< NRanks && blockIdx.x == 0)"))],
        "after a wait only some threads make: the acquire is under the branch at line",
    ),
}  # fmt: skip


@pytest.mark.parametrize("bug", sorted(DATA_BUGS))
def test_the_data_rules_find_each_class_on_the_foreign_kernel(workspace, ptx_cache, tmp_path, bug):
    needs_nvcc()
    target = load_catalog(CATALOG, tree_root=workspace).target
    tree = tmp_path / "tree"
    target_scratch(workspace, tree, target)
    header = tree / HEADER
    text = header.read_text()
    edits, said = DATA_BUGS[bug]
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    header.write_text(text)
    report = check_contracts(tree, target.annotated(), cache=ptx_cache)
    found = {(v.site, v.variant) for v in report.violations if said in v.message}
    assert found == {(WAIT, "harness.cu")}, [str(v) for v in report.violations]
