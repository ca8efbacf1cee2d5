"""The delays that expose apply to afdep's sources and compile with NVRTC (no
GPU): one of each kind for a warp-producer and a block-producer release."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from afdep.jit import CSRC, KernelSpec, compile_kernel
from faults.catalog import load_catalog
from faults.generate.expose import expose_faults
from faults.pipeline.apply import apply_patches
from invariants.sync.sites import SourceTree, parse_tree
from tests.unit.faults.generate.test_expose import AFDEP, PRODUCERS, REPO, declared

# Each tree holds one forced order (which defines the cell function alone)
# and the other release's uneven delay.
TREES = {
    "warp-forced": (
        "gen.forced-order.cf.attention_dispatch.row_release",
        "gen.uneven-delay.cf.attention_dispatch.done_release",
    ),
    "block-forced": (
        "gen.forced-order.cf.attention_dispatch.done_release",
        "gen.uneven-delay.cf.attention_dispatch.row_release",
    ),
}
SPEC = KernelSpec.make(
    "attention_dispatch",
    kHidden=2048,
    kTopK=8,
    kFp8=False,
    kCountFirst=True,
    kArmAttention=False,
    kNumThreads=512,
)


@pytest.mark.parametrize("label", sorted(TREES))
def test_exposing_faults_apply_and_compile(tmp_path, monkeypatch, label):
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(tmp_path / "jit"))
    catalog = load_catalog(AFDEP, tree_root=REPO)
    generated = expose_faults(declared(parse_tree(CSRC)[0], PRODUCERS), catalog)
    catalog = replace(catalog, faults={**catalog.faults, **generated})
    shutil.copytree(CSRC, tmp_path / "afdep/csrc")
    patches = [p for fault_id in TREES[label] for p in catalog.all_patches(fault_id)]
    [changed] = apply_patches(SourceTree(tmp_path / "afdep/csrc"), catalog, patches)
    text = changed.read_text()
    assert changed.name == "attention_dispatch.cuh"
    assert text.count("#define AFD_ORDER_CELL") == 1
    assert [fault_id in text for fault_id in TREES[label]] == [True, True]
    compiled = compile_kernel(SPEC, root=tmp_path / "afdep/csrc")
    assert not compiled.from_cache and compiled.cubin[:4] == b"\x7fELF"
