"""A catalog's scheduled faults over seeds (docs/operators.md, "Seeded
schedules and replay"): the patch a seed gives (the same seed, the same tree),
a seeded fault's own patches and what it drew, and seeds replacing only the
scheduled faults."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog
from faults.pipeline.apply import apply_fault
from faults.pipeline.scratch import tree_digest
from faults.schedules.draw import draw
from faults.schedules.seeds import describe, with_seed, with_seeds
from invariants.sync.sites import SourceTree

REPO = Path(__file__).parents[4]
AFDEP = REPO / "catalogs/afdep.toml"
CSRC = REPO / "afdep/csrc"


def applied(tmp_path: Path, name: str, label: str, catalog) -> tuple[str, str]:
    """The patched file's text and the tree digest of `label` applied to a copy."""
    tree = tmp_path / name
    shutil.copytree(CSRC, tree / "afdep/csrc")
    changed_files = apply_fault(SourceTree(tree / "afdep/csrc"), catalog, label)
    [changed] = [p for p in changed_files if p.name == "ffn_combine.cuh"]
    return changed.read_text(), tree_digest(tree / "afdep/csrc")


def test_the_same_seed_gives_the_same_patch_and_tree_and_another_seed_another(tmp_path):
    catalog = load_catalog(AFDEP, tree_root=REPO)
    for seed in (3, 4):
        catalog = with_seed(catalog, "N5s.pct", seed)
    first = applied(tmp_path, "a", "N5s.pct~s3", catalog)
    again = applied(tmp_path, "b", "N5s.pct~s3", catalog)
    other = applied(tmp_path, "c", "N5s.pct~s4", catalog)
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]
    points = draw(catalog.all_patches("N5s.pct~s3")[0].schedule, 200_000).points
    assert f"(blockIdx.x) == {points[0][0]} && (threadIdx.x / 32) == {points[0][1]}" in first[0]
    assert "scheduled delay (pct seed 3) at start of cb.ffn_combine.row_store" in first[0]


def test_a_seeded_fault_owns_its_patches_and_says_its_schedule():
    catalog = with_seed(load_catalog(AFDEP, tree_root=REPO), "N2s.uneven", 2)
    patches = catalog.all_patches("N2s.uneven~s2")
    assert [(p.owner, p.action, p.schedule and p.schedule.seed) for p in patches] == [
        ("N2s.uneven~s2", "delay", 2),
        ("N2s.uneven~s2", "skip", None),
    ]
    seed, text = describe(catalog, "N2s.uneven~s2")
    lengths = draw(patches[0].schedule, 200_000).lengths
    assert seed == 2 and len(lengths) == 16
    assert (
        text == "cf.attention_dispatch.row_store uneven seed 2: ns by cta "
        f"[{', '.join(map(str, lengths))}]"
    )
    assert describe(catalog, "N2") == (None, "")
    assert describe(catalog, "control.clean") == (None, "")


def test_seeds_replace_only_the_scheduled_faults():
    catalog = load_catalog(AFDEP, tree_root=REPO)
    seeded, ids = with_seeds(catalog, ["N2", "P1s.pct"], (5, 6))
    assert ids == ["N2", "P1s.pct~s5", "P1s.pct~s6"]
    assert with_seeds(catalog, ["N2"], ()) == (catalog, ["N2"])
    with pytest.raises(CatalogError) as error:
        with_seeds(catalog, ["N2", "P1"], (0,))
    assert str(error.value) == "--seeds 1: no chosen fault has a scheduled delay"
