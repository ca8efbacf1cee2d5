"""The CUB scan target (catalogs/cub_scan.toml, docs/targets.md, "CUB's
decoupled look-back") on a workspace fetched from the registry once a
session: every anchor resolves once on the untouched CCCL 2.8.2 headers, our
harness builds, the publish contract holds on the clean tree (source and
PTX) and flags every generated order mutant at its site, on both. Skipped,
with the reason, when the registry cannot be reached or nvcc is not here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from faults.catalog import load_catalog
from faults.generate.site_faults import with_generated
from faults.operators import ORDER_FAMILIES
from faults.pipeline.run import substitute
from invariants.sync.contract import check_contracts
from invariants.sync.sites import parse_tree
from tests.unit.tools.targets.workspaces import fault_contract, fetched, needs_nvcc

ROOT = Path(__file__).resolve().parents[4]
CATALOG = ROOT / "catalogs" / "cub_scan.toml"
INCLUSIVE, PARTIAL, WAIT = "cub.tile.inclusive_release", "cub.tile.partial_release", "cub.tile.status_wait"


@pytest.fixture(scope="session")
def workspace(tmp_path_factory) -> Path:
    return fetched("cub_scan", tmp_path_factory.mktemp("cub") / "ws")


def test_every_anchor_resolves_to_its_statement(workspace):
    catalog = load_catalog(CATALOG, tree_root=workspace)  # resolves each anchor once
    sites = {s.name: s for s in parse_tree(workspace / "include/cub/agent", catalog.target.anchors)[0]}
    assert len(sites) == 22
    text = (workspace / "include/cub/agent/single_pass_scan_operators.cuh").read_text().split("\n")
    first, last = (lambda site: text[site.start].strip()), (lambda site: text[site.end - 2].strip())
    assert first(sites[INCLUSIVE]).startswith("detail::store_release(d_tile_status")
    wait = sites[WAIT]  # the non-packed state's do-while, through its closing `while`
    assert [first(wait), last(wait)] == [
        "do",
        "} while (__any_sync(0xffffffff, (status == SCAN_TILE_INVALID)));",
    ]


def test_the_harness_builds(workspace, tmp_path):
    needs_nvcc()
    catalog = load_catalog(CATALOG, tree_root=workspace)
    words = substitute(catalog.target.build, tree=str(workspace), out=str(tmp_path),
                       python="python3", digest="0" * 64, gpus="1", ranks="1")  # fmt: skip
    built = subprocess.run(words, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    assert (tmp_path / "harness").is_file()


@pytest.fixture(scope="module")
def ptx_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cub-ptx")


def test_the_clean_tree_keeps_the_contract(workspace, ptx_cache):
    needs_nvcc()
    target = load_catalog(CATALOG, tree_root=workspace).target
    report = check_contracts(workspace, target, cache=ptx_cache)
    assert (report.sites_checked, report.variants_checked, report.violations) == (3, 1, [])


# Each generated order mutant, and what the contract says of its tree: the
# source finding, then the PTX's (our harness's one translation unit).
STORED_LATE = "stores the data it guards with st.cg.u64 after its release on every path of the iteration: no release follows the store"
MUTANTS = {
    "gen.weaken-release.cub.tile.inclusive_release": [
        (INCLUSIVE, None, "publish store_relaxed is no release at scope gpu and no __threadfence precedes it"),
        (INCLUSIVE, "harness.cu", "publish is st.relaxed.gpu: no release at scope gpu"),
    ],
    "gen.weaken-release.cub.tile.partial_release": [
        (PARTIAL, None, "publish store_relaxed is no release at scope gpu and no __threadfence precedes it"),
        (PARTIAL, "harness.cu", "publish is st.relaxed.gpu: no release at scope gpu"),
    ],
    "gen.remove-fence.cub.tile.status_wait": [
        (WAIT, None, "no acquire at scope gpu: no load_acquire, nor a load then __threadfence"),
        (WAIT, "harness.cu", "no ld.acquire.gpu in the wait (nor a call that acquires, nor a relaxed load then fence.acq_rel.gpu)"),
    ],
    "gen.publish-early.cub.tile.inclusive_release": [
        (INCLUSIVE, None, "the guarded site cub.tile.inclusive_store (lines 930-932) does not end before it starts"),
        (INCLUSIVE, "harness.cu", STORED_LATE),
    ],
    "gen.publish-early.cub.tile.partial_release": [
        (PARTIAL, None, "the guarded site cub.tile.partial_store (lines 945-947) does not end before it starts"),
        (PARTIAL, "harness.cu", STORED_LATE),
    ],
}  # fmt: skip


def test_every_order_mutant_is_one_listed_here(workspace):
    catalog = with_generated(load_catalog(CATALOG, tree_root=workspace), workspace)
    found = sorted(i for i, f in catalog.faults.items() if f.family in ORDER_FAMILIES)
    assert found == sorted(MUTANTS)


@pytest.mark.parametrize("fault", sorted(MUTANTS))
def test_the_contract_flags_each_order_mutant_at_its_site(workspace, ptx_cache, tmp_path, fault):
    needs_nvcc()
    report, sites = fault_contract(CATALOG, workspace, tmp_path / "tree", fault, ptx_cache)
    assert [(v.site, v.variant, v.message) for v in report.violations] == MUTANTS[fault]
    # Each at a line of its site or, moved above it, of the store it guards.
    held = {v.site: set(sites[v.site].lines) | set(sites[sites[v.site].guards or v.site].lines)
            for v in report.violations}  # fmt: skip
    assert all(v.line in held[v.site] for v in report.violations)
