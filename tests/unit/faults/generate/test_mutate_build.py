"""Every mutant of the afdep catalog applies, marked at its site, and builds
with NVRTC (no GPU). A tree a mutant takes ~3.4 s to build on a 2-core
machine, ~3.5 min for all 60; mutants of distinct sites share a tree
instead (12 trees, ~36 s, the kernels whose headers a tree leaves alone
from the cache): a rewrite's compile error is its own either way.
The weaker waits are made in their mutants' trees only (a rule's twin)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from faults.catalog import Fault, load_catalog
from faults.generate.site_faults import with_generated
from faults.operators import REWRITE_FAMILIES, Family
from faults.pipeline.apply import apply_fault, apply_patches
from faults.pipeline.run import BuildError, build_tree
from faults.pipeline.scratch import make_scratch, tree_digest
from invariants.sync.functions import definitions
from invariants.sync.sites import SourceTree, parse_tree, source_files

REPO = Path(__file__).parents[4]
CATALOG = with_generated(load_catalog(REPO / "catalogs/afdep.toml"), REPO)
MUTANTS = [
    f
    for f in CATALOG.faults.values()
    if f.family in REWRITE_FAMILIES or f.family is Family.PUBLISH_EARLY
]
# publish-early needs a release's guards= (see test_mutate.py): each its own tree.
MOVED = sum(f.family is Family.PUBLISH_EARLY for f in MUTANTS)


def test_every_afdep_mutant_applies_with_its_marker_at_its_site(tmp_path):
    sources = CATALOG.target.sources
    clean_sites, clean_violations = parse_tree(REPO / sources)
    for fault in MUTANTS:
        tree = tmp_path / fault.id
        shutil.copytree(REPO / sources, tree / sources)
        changed = apply_fault(SourceTree(tree / sources), CATALOG, fault.id)
        # the rewrite, then its twin (a text patch), then its exposing delay
        patch, *others = fault.patches
        twins = [p for p in others if p.file is not None]
        exposing = [p for p in others if p.file is None]
        tag = f"// AFDFAULT {fault.id} "
        texts = {path: path.read_text() for path in changed}
        lines = [line for text in texts.values() for line in text.splitlines(keepends=True)]
        unmarked = "".join(line for line in lines if tag not in line)
        # a line each for the marker and the delay, and each line of a twin's copy
        tagged = 1 + len(exposing) + sum(t.new.count("\n") - t.old.count("\n") for t in twins)
        assert patch.new in unmarked and len(lines) == unmarked.count("\n") + tagged, fault.id
        assert all(t.old in unmarked and t.marker == "false" for t in twins), fault.id
        sites, violations = parse_tree(tree / sources)
        assert sorted(s.name for s in sites) == sorted(s.name for s in clean_sites), fault.id
        assert sorted(v.message for v in violations) == sorted(v.message for v in clean_violations)
        marked = next(s for s in sites if s.name == patch.marker_site)
        assert (
            texts[marked.path]
            .splitlines()[marked.start]
            .lstrip()
            .startswith(f'if ({patch.marker}) printf("AFDFAULT {fault.id} ')
        )
        for delay in exposing:  # at the start of the store the release publishes or the wait guards
            held = next(s for s in sites if s.name == delay.site)
            opening = held.path.read_text().splitlines()[held.start]
            assert (delay.action, opening.lstrip()[: len(delay.when) + 5]) == (
                "delay",
                f"if ({delay.when})",
            ), fault.id
        # wrong-slot's rule and the epoch rules that wait too little expose (catalogs/afdep.toml)
        exposes = fault.family is Family.WRONG_SLOT or (
            fault.family is Family.EPOCH_OFF_BY_ONE and "+ 1," not in patch.new
        )
        assert bool(exposing) == exposes, fault.id
        shutil.rmtree(tree)


def shared_trees(mutants: list[Fault]) -> list[list[Fault]]:
    """The mutants in few trees, no two at one site nor two of one twin (each
    would define it), those with a twin placed first; a publish-early, which
    spans two sites, alone."""
    trees: list[tuple[set[str], list[Fault]]] = []
    for fault in sorted(mutants, key=lambda f: not twin_of(f)):
        taken = {fault.patches[0].marker_site} | twin_of(fault)
        spare = next(
            (t for t in trees if not taken & t[0] and fault.family is not Family.PUBLISH_EARLY),
            None,
        )
        if spare is None or any(f.family is Family.PUBLISH_EARLY for f in spare[1]):
            trees.append((taken, [fault]))
        else:
            spare[0].update(taken)
            spare[1].append(fault)
    return [faults for _, faults in trees]


def twin_of(fault: Fault) -> set[str]:
    """The twins a mutant's tree defines, by the name each copy's tag gives it."""
    return {
        name
        for p in fault.patches[1:]
        if p.file is not None
        for name in re.findall(r"// AFDFAULT \S+ twin (\w+) of ", p.new or "")
    }


def test_every_afdep_mutant_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(tmp_path / "jit"))
    trees = shared_trees(MUTANTS)
    assert (len(MUTANTS), len(trees)) == (
        61 + MOVED,
        8 + MOVED,
    )  # remove-barrier 9 (cf.ffn_place.prefix_release); 7 weaken-acquire, each its own twin
    assert {f.family for f in MUTANTS} - {Family.PUBLISH_EARLY} == set(REWRITE_FAMILIES)
    for number, faults in enumerate(trees):
        tree = make_scratch(REPO, tmp_path / f"tree{number}")
        patches = [patch for f in faults for patch in f.patches]
        apply_patches(SourceTree(tree / CATALOG.target.sources), CATALOG, patches)
        digest = tree_digest(tree / CATALOG.target.sources)
        try:
            build_tree(CATALOG.target, tree, tmp_path / f"out{number}", digest, gpus=2)
        except BuildError as error:
            pytest.fail(f"tree of {[f.id for f in faults]} does not build: {error}")
        shutil.rmtree(tree)


def marked_per_site() -> list[Fault]:
    """Per site, its first generated fault of one patch that is no rewrite (a
    delay, a skip): each prints the catalog's rank expression in its marker."""
    chosen: dict[str, Fault] = {}
    for fault in CATALOG.faults.values():
        rewrite = fault.family in REWRITE_FAMILIES or fault.family is Family.PUBLISH_EARLY
        if fault.id.startswith("gen.") and not rewrite and len(fault.patches) == 1:
            chosen.setdefault(fault.patches[0].site, fault)
    return list(chosen.values())


def test_every_kernel_with_a_site_builds_with_a_fault_marker(tmp_path, monkeypatch):
    """A marker prints `target.rank` (rank_idx), so a kernel that holds a site
    must define it: a delay or skip at every site that has one, in one tree,
    covering every kernel header that holds a site, builds."""
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(tmp_path / "jit"))
    faults = marked_per_site()
    sites, _ = parse_tree(REPO / CATALOG.target.sources)
    file_of = {site.name: site.path.name for site in sites}
    assert {file_of[f.patches[0].site] for f in faults} == set(file_of.values())
    tree = make_scratch(REPO, tmp_path / "tree")
    patches = [f.patches[0] for f in faults]
    apply_patches(SourceTree(tree / CATALOG.target.sources), CATALOG, patches)
    digest = tree_digest(tree / CATALOG.target.sources)
    try:
        build_tree(CATALOG.target, tree, tmp_path / "out", digest, gpus=2)
    except BuildError as error:
        pytest.fail(f"the tree of {[f.id for f in faults]} does not build: {error}")


@pytest.mark.parametrize(
    "family, twin, load",
    [
        (Family.WEAKEN_ACQUIRE, "wait_until_relaxed", "ld_relaxed_sys"),
        (Family.NARROW_SCOPE, "wait_until_gpu", "ld_acquire_gpu"),
    ],
)
def test_a_weaker_wait_is_made_in_its_mutants_tree_only_and_builds(
    family, twin, load, tmp_path, monkeypatch
):
    """The product defines no twin and no kernel calls one; the mutant's
    tree defines it right after wait_until, its flag loads weakened, each of
    its lines tagged, and the site calls it; that tree builds."""
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(tmp_path / "jit"))
    sources = REPO / CATALOG.target.sources
    assert definitions(sources, twin) == []
    assert not any(twin in path.read_text() for path in source_files(sources))
    fault = CATALOG.fault(f"gen.{family}.cf.ffn_place.count_wait")
    tree = make_scratch(REPO, tmp_path / "tree")
    apply_fault(SourceTree(tree / CATALOG.target.sources), CATALOG, fault.id)
    clean = (sources / "common/comm.cuh").read_text()
    start = clean.index("__device__ __noinline__ void wait_until(")
    end = clean.index("\n}\n", start) + 3
    copy = clean[start:end].replace("void wait_until(", f"void {twin}(")
    copy = copy.replace("ptx::ld_acquire_sys(flag)", f"ptx::{load}(flag)")
    assert (copy.count(f"ptx::{load}(flag)"), copy.count("ld_acquire_sys")) == (2, 0)
    tag = f"  // AFDFAULT {fault.id} twin {twin} of wait_until"
    tagged = "".join(line + tag + "\n" for line in copy.splitlines())
    comm = (tree / CATALOG.target.sources / "common/comm.cuh").read_text()
    assert comm == clean[:end] + tagged + clean[end:]
    [site] = [
        s
        for s in parse_tree(tree / CATALOG.target.sources)[0]
        if s.name == "cf.ffn_place.count_wait"
    ]
    region = site.path.read_text().splitlines()[site.start : site.end - 1]
    assert [line.strip() for line in region if "wait_until" in line] == [
        f'{twin}(count_ready + source, epoch, "cf.ffn_place.count_wait", p);'
    ]
    digest = tree_digest(tree / CATALOG.target.sources)
    try:
        build_tree(CATALOG.target, tree, tmp_path / "out", digest, gpus=2)
    except BuildError as error:
        pytest.fail(f"the tree of {fault.id} does not build: {error}")


PRIMITIVE_TWINS = {  # a mutant's rewrite -> the primitive its tree makes of the product's
    "gen.narrow-scope.cb.ffn_combine.row_release": (
        "st_release_gpu",
        "st_release_sys",
        "__device__ __forceinline__ void st_release_gpu(u64* ptr, u64 value) {\n"
        '  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");\n'
        "}\n",
    ),
    "gen.narrow-scope.cf.ffn_place.prefix_release.1": (
        "fence_acq_rel_gpu",
        "fence_acq_rel_sys",
        "__device__ __forceinline__ void fence_acq_rel_gpu() {\n"
        '  asm volatile("fence.acq_rel.gpu;" ::: "memory");\n'
        "}\n",
    ),
    "gen.narrow-scope.cf.attention_dispatch.done_release.2": (
        "red_add_release_gpu",
        "red_add_release_sys",
        "__device__ __forceinline__ void red_add_release_gpu(u64* ptr, u64 value) {\n"
        '  asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(ptr), "l"(value) : '
        '"memory");\n'
        "}\n",
    ),
    "gen.weaken-release.cf.attention_dispatch.done_release": (
        "red_add_relaxed_sys",
        "red_add_release_sys",
        "__device__ __forceinline__ void red_add_relaxed_sys(u64* ptr, u64 value) {\n"
        '  asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(ptr), "l"(value) : '
        '"memory");\n'
        "}\n",
    ),
    "gen.narrow-scope.cf.ffn_place.count_wait": (  # the wait's twin calls it (its third patch)
        "ld_acquire_gpu",
        "ld_acquire_sys",
        "__device__ __forceinline__ u64 ld_acquire_gpu(const u64* ptr) {\n"
        "  u64 value;\n"
        '  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(ptr) : '
        '"memory");\n'
        "  return value;\n"
        "}\n",
    ),
}


@pytest.mark.parametrize("fault_id", PRIMITIVE_TWINS)
def test_a_weaker_primitive_is_a_twin_of_the_products_named_by_the_rules_match(fault_id):
    """common/ptx.cuh ships no weaker primitive: the rule's twin `\\1_gpu` of
    `\\1_sys` (`\\1_relaxed_sys` of `\\1_release_sys`) is made, per match,
    right after the product's, its PTX's scope (or order) rewritten."""
    name, of, copy = PRIMITIVE_TWINS[fault_id]
    sources = REPO / CATALOG.target.sources
    assert definitions(sources, name) == []
    twin = CATALOG.fault(fault_id).patches[1]
    [product] = definitions(sources, of)
    tag = f"  // AFDFAULT {fault_id} twin {name} of {of}"
    assert (twin.file, twin.old, twin.marker) == ("common/ptx.cuh", product.source, "false")
    assert twin.new == product.source + "".join(line + tag + "\n" for line in copy.splitlines())


def test_a_weakened_release_store_calls_the_products_relaxed_store_and_makes_none():
    """st_relaxed_sys, which the kernels use, is to the letter the twin that
    weaken-release makes of st_release_sys: the mutant calls it, its tree adds nothing."""
    [rewrite] = CATALOG.fault("gen.weaken-release.cf.attention_dispatch.row_release").patches
    assert "ptx::st_relaxed_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot" in rewrite.new
