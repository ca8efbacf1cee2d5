"""The forced-order actions (hold, signal) and the cell they share, on the
CPU fixture: the exact text they insert, and a run of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from faults.catalog import CatalogError, Patch, load_catalog
from faults.judge.verdict import Verdict
from faults.pipeline.apply import ACTIONS, apply_patches
from faults.pipeline.engine import Engine
from invariants.sync.sites import SourceTree

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload"
CELL = "forced-order cell"


@pytest.fixture
def sources(tmp_path):
    """The fixture's sources in a copy of the tree, parsed."""
    root = tmp_path / "tree"
    shutil.copytree(FIXTURE, root / "tests/fixtures/flag_payload")
    return SourceTree(root / "tests/fixtures/flag_payload")


@pytest.fixture
def catalog():
    return load_catalog(FIXTURE / "catalog.toml", tree_root=REPO)


def hold(**overrides) -> Patch:
    fields = dict(site="fx.producer.payload_store", action="hold", ns=1_000_000)
    return Patch("H", **{**fields, "when": "rank_idx == 0", "cell": "1", **overrides})


def signal(**overrides) -> Patch:
    fields = dict(site="fx.producer.flag_release", action="signal", when="true", cell="1")
    return Patch("H", **{**fields, **overrides})


def region(text: str, site: str) -> list[str]:
    return text.split(f"// @site {site} ")[1].split(f"// @end {site}")[0].splitlines()[1:-1]


def test_the_forced_order_actions_are_registered():
    assert {"hold", "signal"} <= set(ACTIONS)
    assert all("->" in ACTIONS[name].__doc__ for name in ("hold", "signal"))


def test_hold_and_signal_insert_exactly_this_and_the_cell_once(sources, catalog):
    apply_patches(sources, catalog, [hold(), signal()])
    text = (sources.root / "main.cpp").read_text()
    original = (FIXTURE / "main.cpp").read_text().splitlines()
    tag = "  // AFDFAULT H forced-order cell"
    prelude = [
        "#ifndef AFD_ORDER_CELL" + tag,
        "#define AFD_ORDER_CELL" + tag,
        "#include <atomic>" + tag,
        "#include <chrono>" + tag,
        "inline std::atomic<unsigned>* afd_order_cell(unsigned index) {" + tag,
        "  static std::atomic<unsigned> afd_cells[64];" + tag,
        "  return afd_cells + index;" + tag,
        "}" + tag,
        "#endif  // AFD_ORDER_CELL" + tag,
    ]
    after = original.index('#include "common/wait.h"') + 1
    lines = text.splitlines()
    assert lines[after : after + len(prelude)] == prelude  # after the last include, once
    assert text.count("#define AFD_ORDER_CELL") == 1
    assert region(text, "fx.producer.payload_store")[0] == (
        "  if (rank_idx == 0) { std::atomic<unsigned>* const afd_cell = afd_order_cell(1); "
        "const unsigned afd_seen = afd_cell->load(); "
        "const auto afd_t0 = std::chrono::steady_clock::now(); "
        "while (afd_cell->load() == afd_seen && std::chrono::steady_clock::now() - afd_t0 < "
        "std::chrono::nanoseconds(1000000)) { } "
        'if (true) std::printf("AFDFAULT H rank=%d\\n", static_cast<int>(rank_idx)); }  '
        "// AFDFAULT H hold at most 1000000 ns at start of fx.producer.payload_store for cell 1"
    )
    assert region(text, "fx.producer.flag_release") == [
        "  channel.flag.store(round_idx + 1, std::memory_order_release);",
        "  if (true) { afd_order_cell(1)->fetch_add(1u); }  "
        "// AFDFAULT H signal cell 1 at end of fx.producer.flag_release",
    ]
    # nothing else changed: the prelude and the two injected lines
    assert len(lines) == len(original) + len(prelude) + 2


def test_cuda_hold_and_signal_spin_on_the_targets_clock(tmp_path):
    sources = tmp_path / "src"
    (sources / "impls").mkdir(parents=True)
    (sources / "impls/k.cuh").write_text(
        "#pragma once\n__global__ void k(int* p, int* flag) {\n  const int rank_idx = 0;\n"
        "  // @site k.store kind=store\n  p[threadIdx.x] = 1;\n  // @end k.store\n"
        "  // @site k.release kind=release\n  if (threadIdx.x == 0) *flag = 1;\n"
        "  // @end k.release\n}\n"
    )
    catalog_path = tmp_path / "c.toml"
    catalog_path.write_text(
        '[target]\nname = "k"\nsources = "src"\nlanguage = "cuda"\nclock = "my_clock()"\n'
        'rank = "rank_idx"\nrun = ["true"]\n'
        "[target.log]\nmismatch = 'M'\ntimeout = 'T'\nassertion = 'A'\ndevice_error = 'E'\n"
        "digest = 'D(.+)'\n"
        '[[fault]]\nid = "K"\nexpect = "pass"\npatches = [\n'
        '  { site = "k.store", action = "hold", ns = 100, when = "threadIdx.x >= 32", '
        'marker = "threadIdx.x == 32", cell = "0" },\n'
        '  { site = "k.release", action = "signal", when = "threadIdx.x == 0", cell = "0" },\n]\n'
    )
    catalog = load_catalog(catalog_path, tree_root=tmp_path)
    apply_patches(SourceTree(sources), catalog, catalog.all_patches("K"))
    lines = (sources / "impls/k.cuh").read_text().splitlines()
    tag = "  // AFDFAULT K forced-order cell"
    assert lines[:9] == [
        "#pragma once",
        "#ifndef AFD_ORDER_CELL" + tag,
        "#define AFD_ORDER_CELL" + tag,
        "static __device__ __forceinline__ volatile unsigned int* afd_order_cell"
        "(unsigned int index) {" + tag,
        "  __shared__ unsigned int afd_cells[32];" + tag,
        "  return afd_cells + index;" + tag,
        "}" + tag,
        "#endif  // AFD_ORDER_CELL" + tag,
        "__global__ void k(int* p, int* flag) {",
    ]
    assert lines[11] == (
        "  if (threadIdx.x >= 32) { volatile unsigned int* const afd_cell = afd_order_cell(0); "
        "const unsigned int afd_seen = *afd_cell; const unsigned long long afd_t0 = my_clock(); "
        "while (*afd_cell == afd_seen && my_clock() - afd_t0 < 100ull) { } "
        'if (threadIdx.x == 32) printf("AFDFAULT K rank=%d\\n", static_cast<int>(rank_idx)); }  '
        "// AFDFAULT K hold at most 100 ns at start of k.store for cell 0"
    )
    assert lines[16] == (
        "  if (threadIdx.x == 0) { volatile unsigned int* const afd_cell = afd_order_cell(0); "
        "*afd_cell = *afd_cell + 1u; }  // AFDFAULT K signal cell 0 at end of k.release"
    )


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            '{ site = "fx.producer.payload_store", action = "hold" }',
            "fault H patch #0: ns: a hold needs a positive int of nanoseconds, got None",
        ),
        (
            '{ site = "fx.producer.payload_store", action = "hold", ns = 5, cell = "" }',
            "fault H patch #0: cell: an index expression, got ''",
        ),
        (
            '{ site = "fx.producer.flag_release", action = "signal", ns = 5 }',
            "fault H patch #0: ns: the signal action takes none",
        ),
    ],
)
def test_bad_forced_order_patches_are_named(tmp_path, patch, message):
    text = (FIXTURE / "catalog.toml").read_text()
    path = tmp_path / "c.toml"
    path.write_text(text + f'\n[[fault]]\nid = "H"\nexpect = "pass"\npatches = [{patch}]\n')
    with pytest.raises(CatalogError) as error:
        load_catalog(path)
    assert str(error.value) == f"{path}: {message}"


def test_a_forced_order_fault_builds_runs_and_fires_on_the_fixture(tmp_path):
    """The producer holds (nobody bumps its cell before its own signal, so it
    waits the whole bound), stores, releases and signals: it passes, and its
    marker fires."""
    text = (FIXTURE / "catalog.toml").read_text()
    path = tmp_path / "c.toml"
    path.write_text(
        text + '\n[[fault]]\nid = "H"\nexpect = "pass"\npatches = [\n'
        '  { site = "fx.producer.payload_store", action = "hold", ns = 1_000_000 },\n'
        '  { site = "fx.producer.flag_release", action = "signal" },\n]\n'
    )
    catalog = load_catalog(path, tree_root=REPO)
    [result] = Engine(catalog, REPO, tmp_path / "work").evaluate("H", list(catalog.configs))
    assert (result.verdict, result.ok) == (Verdict.PASSED, True)
    assert result.outcome["markers"] == {"H": 4}  # one hold per round
