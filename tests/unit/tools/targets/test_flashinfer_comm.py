"""The flashinfer comm target (catalogs/flashinfer_comm.toml, docs/targets.md)
on a workspace fetched from the registry once a session: its catalog loads,
its anchors resolve once each on the untouched 0.7.4 header, and our harness
builds clean, with a generated skip and with a generated delay (the three
builds once a session, side by side: ~35 s each on two cores); its publish
contract holds on the clean tree, on the source and in the PTX, and flags every
generated mutant of what it holds (weakened, narrowed), at the mutant's site.
Skipped, with the reason, when the registry cannot be reached or nvcc is not here."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.catalog.model import Family
from faults.generate.site_faults import with_generated
from faults.pipeline.apply import apply_fault
from faults.pipeline.run import substitute
from faults.pipeline.scratch import target_scratch
from invariants.sync.contract import check_contracts
from invariants.sync.sites import parse_tree
from tools.faults_cli.main import main as faults_main
from tools.targets.fetch import FetchError, make_workspace, read_release
from tools.targets.registry import CACHE

ROOT = Path(__file__).resolve().parents[4]
CATALOG = ROOT / "catalogs" / "flashinfer_comm.toml"
HEADER = "include/flashinfer/comm/trtllm_allreduce_fusion.cuh"
HEADER_SHA256 = "9f5529d444072b5a373d244001dcf2fb272362c2562471b5097287a4c7b8bb70"
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


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    into = tmp_path_factory.mktemp("flashinfer") / "ws"
    try:
        make_workspace(read_release("flashinfer_comm"), into)
    except FetchError as error:
        if "cannot be reached" in str(error):
            pytest.skip(f"registry unreachable: {error}")
        raise
    return into


def test_the_fetched_header_is_the_released_one_untouched(workspace):
    digest = hashlib.sha256((workspace / HEADER).read_bytes()).hexdigest()
    assert digest == HEADER_SHA256
    names = sorted(p.name for p in (workspace / "include/flashinfer/comm").iterdir())
    assert names == ["trtllm_allreduce_fusion.cuh"]  # no vLLM all-reduce, nothing else


def test_every_anchor_resolves_once_to_its_statement(workspace):
    catalog = load_catalog(CATALOG, tree_root=workspace)
    sources = workspace / catalog.target.sources
    sites, violations = parse_tree(sources, catalog.target.anchors)
    assert violations == []
    assert {site.name: site.kind for site in sites} == {n: k for n, (k, _) in SITES.items()}
    lines = (sources / "trtllm_allreduce_fusion.cuh").read_text().splitlines()
    for site in sites:
        assert site.anchored
        assert lines[site.lines.start - 1].strip().startswith(SITES[site.name][1]), site.name


def test_the_catalog_runs_every_config_as_logical_ranks(workspace):
    catalog = load_catalog(CATALOG, tree_root=workspace)
    assert [(c.name, c.gpus) for c in catalog.configs] == [
        (f"{kernel}-{ranks}", ranks) for kernel in ("twoshot", "oneshot") for ranks in (2, 4, 8)
    ]
    assert catalog.auto_rank_mode(1).value == "logical"


def test_no_tree_of_the_cache_holds_vllms_all_reduce(workspace):
    """vLLM's custom all-reduce, in any copy, is held for an independent check:
    neither it nor ulysses (built on it) is ever unpacked (docs/targets.md)."""
    held = [p for folder in (CACHE / "trees", workspace) for p in folder.rglob("*")
            if "vllm" in p.name.lower() or "ulysses" in p.name.lower()]
    assert held == []


# The skip removes the wait's loop; the delay's tree keeps it, bounded.
FAULTS = {"gen.skip.ar.barrier.flag_wait": False, "gen.delay.ar.oneshot.push": True}


def build(tree: Path, out: Path) -> subprocess.Popen:
    catalog = load_catalog(CATALOG)
    words = substitute(catalog.target.build, tree=str(tree), out=str(out), python="python3",
                       digest="0" * 64, gpus="2", ranks="2")
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(words, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def needs_nvcc() -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH: the harness cannot be compiled here")


@pytest.fixture(scope="session")
def builds(workspace, tmp_path_factory) -> dict[str, tuple[Path, Path, int, str]]:
    """The clean tree and each fault's tree, applied and built side by side:
    per name ("clean" or the fault), the tree, the build's folder, its exit
    code and the end of what it said."""
    needs_nvcc()
    scratch = tmp_path_factory.mktemp("builds")
    trees = {"clean": workspace}
    for fault in FAULTS:
        trees[fault] = scratch / fault / "tree"
        argv = ["--root", str(workspace), "--catalog", str(CATALOG), "apply", fault,
                "--out", str(trees[fault])]
        assert faults_main(argv) == 0, fault
    started: dict[str, subprocess.Popen] = {}
    try:
        for name, tree in trees.items():
            started[name] = build(tree, scratch / name / "out")
        done = {}
        for name, child in started.items():
            _, said = child.communicate(timeout=600)
            done[name] = (trees[name], scratch / name / "out", child.returncode, said[-2000:])
    finally:  # a timeout or a failed start leaves no nvcc running past the session
        for child in started.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    return done


def test_the_harness_builds_on_the_clean_tree(builds):
    _, out, code, said = builds["clean"]
    assert code == 0, said
    assert (out / "harness").is_file()


@pytest.mark.parametrize("fault", FAULTS)
def test_a_generated_fault_applies_and_builds(builds, fault):
    tree, out, code, said = builds[fault]
    text = (tree / HEADER).read_text()
    assert f"AFDFAULT {fault} rank=%d" in text
    assert ("faults timeout: site=ar.barrier.flag_wait" in text) == FAULTS[fault]
    assert "faults timeout: site=ar.oneshot.poll" in text  # the Lamport poll spins too
    assert code == 0, said
    assert (out / "harness").is_file()


# ------------------------------------------------------- the publish contract
# Every generated fault that weakens what the contract holds, and what the
# contract says of its tree: the source finding, then the PTX's (the one
# translation unit of our harness, its six kernels).
CONTRACT_FAMILIES = {Family.WEAKEN_RELEASE, Family.WEAKEN_ACQUIRE, Family.NARROW_SCOPE,
                     Family.REMOVE_BARRIER, Family.REMOVE_FENCE, Family.REMOVE_WARP_SYNC}
RELEASE, WAIT = "ar.barrier.flag_release", "ar.barrier.flag_wait"
NO_ACQUIRE = [
    (WAIT, None, "no acquire at scope sys: no ld_flag, nor a load then fence.sys (the catalog"
     " spells none)"),
    (WAIT, "harness.cu", "no ld.acquire.sys in the wait (nor a call that acquires, nor a relaxed"
     " load then fence.acq_rel.sys)"),
]  # fmt: skip
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
}  # fmt: skip


@pytest.fixture(scope="module")
def ptx_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("flashinfer-ptx")


def test_the_clean_tree_keeps_the_contract_on_the_source(workspace):
    target = load_catalog(CATALOG, tree_root=workspace).target
    report = check_contracts(workspace, target, ptx=False)
    assert (report.sites_checked, report.violations) == (2, [])


def test_the_clean_tree_keeps_the_contract_in_the_ptx(workspace, ptx_cache, tmp_path):
    needs_nvcc()
    target = load_catalog(CATALOG, tree_root=workspace).target
    report = check_contracts(workspace, target, cache=ptx_cache)
    assert (report.sites_checked, report.variants_checked, report.violations) == (2, 1, [])
    scratch = target_scratch(workspace, tmp_path / "tree", target)  # as a sweep's tree reads
    report = check_contracts(scratch, target.annotated(), cache=ptx_cache)
    assert (report.sites_checked, report.variants_checked, report.violations) == (2, 1, [])


def test_every_contract_mutant_is_one_listed_here(workspace):
    catalog = with_generated(load_catalog(CATALOG, tree_root=workspace), workspace)
    found = sorted(i for i, f in catalog.faults.items() if f.family in CONTRACT_FAMILIES)
    assert found == sorted(MUTANTS)


@pytest.mark.parametrize("fault", sorted(MUTANTS))
def test_the_contract_flags_each_mutant_at_its_site(workspace, ptx_cache, tmp_path, fault):
    needs_nvcc()
    catalog = with_generated(load_catalog(CATALOG, tree_root=workspace), workspace)
    tree = target_scratch(workspace, tmp_path / "tree", catalog.target)
    apply_fault(tree, catalog, fault)
    target = catalog.target.annotated()
    report = check_contracts(tree, target, cache=ptx_cache)
    assert [(v.site, v.variant, v.message) for v in report.violations] == MUTANTS[fault]
    sites = {s.name: s for s in parse_tree(tree / target.sources)[0]}
    assert all(v.line in sites[v.site].lines for v in report.violations)


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
    tree = target_scratch(workspace, tmp_path / "tree", target)
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
