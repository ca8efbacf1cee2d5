"""Scheduled delays apply to afdep's sources and compile with NVRTC (no GPU):
a pct schedule in the dispatch's row store (its step names the kernel's
`total_warps`) and an uneven one (a constant table) in the combine's."""

from __future__ import annotations

import shutil

from afdep.jit import CSRC, KernelSpec, compile_kernel
from faults.catalog import load_catalog
from faults.pipeline.apply import apply_fault
from faults.schedules.seeds import with_seed
from invariants.sync.sites import SourceTree
from tests.unit.faults.generate.test_expose import AFDEP, REPO
from tests.unit.faults.generate.test_expose_build import SPEC as DISPATCH

SPECS = {
    "attention_dispatch.cuh": DISPATCH,
    "ffn_combine.cuh": KernelSpec.make("ffn_combine", kHidden=2048, kTopK=8, kNumThreads=512),
}


def test_scheduled_delays_apply_and_compile(tmp_path, monkeypatch):
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(tmp_path / "jit"))
    catalog = with_seed(load_catalog(AFDEP, tree_root=REPO), "P1s.pct", 11)
    catalog = with_seed(catalog, "P5s.uneven", 12)
    shutil.copytree(CSRC, tmp_path / "afdep/csrc")
    sources = SourceTree(tmp_path / "afdep/csrc")
    changed = apply_fault(sources, catalog, "P1s.pct~s11")
    changed += apply_fault(sources, catalog, "P5s.uneven~s12")
    assert sorted(path.name for path in changed) == sorted(SPECS)
    for path in changed:
        assert "scheduled delay" in path.read_text()
        compiled = compile_kernel(SPECS[path.name], root=tmp_path / "afdep/csrc")
        assert not compiled.from_cache and compiled.cubin[:4] == b"\x7fELF"
