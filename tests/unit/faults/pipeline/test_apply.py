"""Applying patches to scratch trees: exact injected code, exact-once text
patches, composition, and the user's tree left alone."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from faults.catalog import Patch, load_catalog
from faults.pipeline.apply import ACTIONS, ApplyError, apply_fault, apply_patches
from faults.pipeline.scratch import tree_digest
from invariants.sync.sites import SourceTree

REPO = Path(__file__).parents[4]
FIXTURE = REPO / "tests/fixtures/flag_payload"
RELEASE_HEADER = (
    "// @site fx.producer.flag_release kind=release producers=thread scope=sys"
    " guards=fx.producer.payload_store\n"
)


@pytest.fixture
def sources(tmp_path):
    """The fixture's sources in a copy of the tree, parsed."""
    root = tmp_path / "tree"
    shutil.copytree(FIXTURE, root / "tests/fixtures/flag_payload")
    return SourceTree(root / "tests/fixtures/flag_payload")


@pytest.fixture
def catalog():
    return load_catalog(FIXTURE / "catalog.toml", tree_root=REPO)


def main_cpp(sources: SourceTree) -> str:
    return (sources.root / "main.cpp").read_text()


def test_actions_are_registered_with_their_docstrings():
    assert set(ACTIONS) == {"delay", "skip", "hold", "signal"}
    assert all("->" in function.__doc__ for function in ACTIONS.values())


def test_delay_injects_a_timed_spin_and_a_marker_before_the_code(sources, catalog):
    apply_fault(sources, catalog, "D1")
    text = main_cpp(sources)
    region = text[
        text.index("// @site fx.producer.payload_store") : text.index(
            "// @end fx.producer.payload_store"
        )
    ]
    lines = region.splitlines()
    assert lines[1] == (
        "  if (true) { const auto afd_t0 = std::chrono::steady_clock::now(); "
        "while (std::chrono::steady_clock::now() - afd_t0 < std::chrono::nanoseconds(200000000)) "
        '{ } if (true) std::printf("AFDFAULT D1 rank=%d\\n", static_cast<int>(rank_idx)); }  '
        "// AFDFAULT D1 delay 200000000 ns at start of fx.producer.payload_store"
    )
    assert lines[2].lstrip().startswith("for (int word_idx = 0;")


def test_skip_removes_the_region_code_and_keeps_a_marker(sources, catalog):
    apply_fault(sources, catalog, "S1")
    text = main_cpp(sources)
    region = text[
        text.index("// @site fx.consumer.flag_wait") : text.index("// @end fx.consumer.flag_wait")
    ]
    assert "wait_until" not in region
    assert region.splitlines()[1] == (
        '  if (true) std::printf("AFDFAULT S1 rank=%d\\n", static_cast<int>(rank_idx));  '
        "// AFDFAULT S1 skip fx.consumer.flag_wait"
    )
    assert "AFDFAULT D1 delay" in text  # the included fault came first


def test_delay_at_end_and_conditions(sources, catalog):
    patch = Patch(
        "X",
        site="fx.producer.flag_release",
        action="delay",
        ns=7,
        at="end",
        when="round_idx == 2",
        marker="round_idx % 2 == 0",
    )
    apply_patches(sources, catalog, [patch])
    region = main_cpp(sources).split(RELEASE_HEADER)[1]
    lines = region.split("// @end")[0].strip().splitlines()
    assert lines[0].startswith("channel.flag.store(")
    assert lines[1].strip().startswith("if (round_idx == 2) {")
    assert 'if (round_idx % 2 == 0) std::printf("AFDFAULT X' in lines[1]


def test_text_patch_applies_exactly_once(sources, catalog):
    apply_patches(sources, catalog, list(catalog.control))
    assert "expected(round_idx, word_idx) + (word_idx == 3);" in main_cpp(sources)
    with pytest.raises(ApplyError, match="anchor found 0 times in main.cpp"):
        apply_patches(sources, catalog, list(catalog.control))  # the anchor is gone now


def test_ambiguous_text_anchor_is_refused(sources, catalog):
    patch = Patch("T", file="main.cpp", old="word_idx", new="w")
    with pytest.raises(ApplyError, match=r"fault T: text patch anchor found \d+ times"):
        apply_patches(sources, catalog, [patch])


def test_missing_site_and_file_are_apply_errors(sources, catalog):
    with pytest.raises(ApplyError, match="fault Q: site fx.gone.site is missing"):
        apply_patches(sources, catalog, [Patch("Q", site="fx.gone.site", action="skip")])
    with pytest.raises(ApplyError, match="text patch file nope.cpp not in"):
        apply_patches(sources, catalog, [Patch("Q", file="nope.cpp", old="a", new="b")])


def test_user_tree_is_not_written(sources, catalog):
    before = tree_digest(FIXTURE)
    apply_fault(sources, catalog, "S1")
    assert tree_digest(FIXTURE) == before
    assert tree_digest(sources.root) != before


def test_cuda_delay_spins_on_the_targets_clock_and_adds_nothing_else(tmp_path):
    sources = tmp_path / "src"
    (sources / "impls").mkdir(parents=True)
    kernel = textwrap.dedent("""\
        #pragma once
        #include "common/x.cuh"
        __global__ void k(int* p) {
          const int rank_idx = 0;
          // @site k.store kind=store
          p[0] = 1;
          // @end k.store
        }
        """)
    (sources / "impls/k.cuh").write_text(kernel)
    catalog_path = tmp_path / "c.toml"
    catalog_path.write_text(
        '[target]\nname = "k"\nsources = "src"\nlanguage = "cuda"\nclock = "my_clock()"\n'
        'rank = "rank_idx"\nrun = ["true"]\n'
        "[target.log]\nmismatch = 'M'\ntimeout = 'T'\nassertion = 'A'\ndevice_error = 'E'\n"
        "digest = 'D(.+)'\n"
        '[[fault]]\nid = "K"\n'
        'expect = "pass"\npatches = [{ site = "k.store", action = "delay", '
        "ns = 100 }]\n"
    )
    catalog = load_catalog(catalog_path, tree_root=tmp_path)
    apply_fault(SourceTree(sources), catalog, "K")
    lines = (sources / "impls/k.cuh").read_text().splitlines()
    assert lines[:5] + lines[6:] == kernel.splitlines()  # one line injected, nothing else
    assert lines[5] == (
        "  if (true) { const unsigned long long afd_t0 = my_clock(); "
        "while (my_clock() - afd_t0 < 100ull) { } "
        'if (true) printf("AFDFAULT K rank=%d\\n", static_cast<int>(rank_idx)); }  '
        "// AFDFAULT K delay 100 ns at start of k.store"
    )


def test_a_text_patch_marks_the_site_that_holds_it(sources, catalog):
    old = "channel.flag.store(round_idx + 1, std::memory_order_release);"
    new = "channel.flag.store(round_idx + 1, std::memory_order_relaxed);"
    patch = Patch("W", file="main.cpp", old=old, new=new, marker="round_idx == 0")
    apply_patches(sources, catalog, [patch])
    region = main_cpp(sources).split(RELEASE_HEADER)[1]
    lines = region.split("// @end")[0].strip().splitlines()
    assert lines[0] == (
        'if (round_idx == 0) std::printf("AFDFAULT W rank=%d\\n", static_cast<int>(rank_idx));'
        "  // AFDFAULT W marker of a text patch in fx.producer.flag_release"
    )
    assert lines[1].strip() == new


def test_a_text_patch_outside_sites_names_marker_site(sources, catalog):
    patch = Patch(
        "O", file="main.cpp", old="constexpr int kRounds = 4;", new="constexpr int kRounds = 5;"
    )
    with pytest.raises(
        ApplyError, match=r"fault O: the text patch at main.cpp:\d+ lies in no site "
    ):
        apply_patches(sources, catalog, [patch])
    marked = Patch(**{**vars(patch), "marker_site": "fx.consumer.flag_wait"})
    apply_patches(sources, catalog, [marked])
    region = main_cpp(sources).split("// @site fx.consumer.flag_wait")[1].split("// @end")[0]
    assert "AFDFAULT O marker of a text patch in fx.consumer.flag_wait" in region
    assert "constexpr int kRounds = 5;" in main_cpp(sources)


def test_a_text_patch_whose_marker_is_false_gets_none_and_may_lie_outside_sites(sources, catalog):
    """A mutant's twin: its rewrite's marker says the fault ran."""
    old = "constexpr int kRounds = 4;"
    patch = Patch("T", file="main.cpp", old=old, new=old + "  // twin", marker="false")
    before = main_cpp(sources)
    assert apply_patches(sources, catalog, [patch]) == [sources.root / "main.cpp"]
    assert main_cpp(sources) == before.replace(old, old + "  // twin")


def test_a_control_text_patch_gets_no_marker(sources, catalog):
    apply_patches(sources, catalog, list(catalog.control), marked=False)
    assert "AFDFAULT" not in main_cpp(sources)
