"""An atomic read with its semantics and its scope (docs/synchronization.md,
"The publish contract"): after a fence, a relaxed atomic publishes only as
far as its own scope reaches, on the source (CUDA's `atomicAdd` is the
device's, `atomicAdd_system` the system's) and on the PTX (`atom` without a
scope is `gpu`; a weak store after a fence publishes nothing). Sources and
PTX are written here, no compiler."""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants.sync.contract import check_contracts
from invariants.sync.ptx_check import ptx_findings
from invariants.sync.ptx_read import parse_module
from invariants.sync.sites import parse_tree

SOURCE = """\
__global__ void k(int* data, unsigned* done) {
  // @site k.store kind=store
  data[threadIdx.x] = 1;
  // @end k.store
  // @site k.done_release kind=release producers=block scope=sys guards=k.store
  __syncthreads();
  if (threadIdx.x == 0) {
    fence_sys();
    ATOMIC(done, 1u);
  }
  // @end k.done_release
}
"""
PUBLISH = 9


@pytest.fixture
def target(spelled):
    return spelled(
        "atomics",
        barrier={"block": "__syncthreads"},
        release={"sys": "st_release_sys"},
        fence={"sys": "fence_sys"},
    )


def source_findings(tmp_path: Path, target, atomic: str) -> list[tuple[int, str]]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cuh").write_text(SOURCE.replace("ATOMIC", atomic))
    report = check_contracts(tmp_path, target, ptx=False)
    return [(v.line, v.message) for v in report.violations]


def test_a_system_atomic_after_a_system_fence_publishes_at_sys(tmp_path, target):
    assert source_findings(tmp_path, target, "atomicAdd_system") == []


def test_a_device_atomic_after_a_system_fence_publishes_at_gpu_only(tmp_path, target):
    assert source_findings(tmp_path, target, "atomicAdd") == [
        (PUBLISH, "publish atomicAdd is no release at scope sys: a relaxed atomic at scope "
         "gpu, the fence before it publishes at gpu"),
    ]  # fmt: skip


def test_an_atomic_with_no_fence_before_it_is_no_release(tmp_path, target):
    unfenced = SOURCE.replace("    fence_sys();\n", "")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cuh").write_text(unfenced.replace("ATOMIC", "atomicAdd_system"))
    report = check_contracts(tmp_path, target, ptx=False)
    assert [(v.line, v.message) for v in report.violations] == [
        (PUBLISH - 1, "publish atomicAdd_system is no release at scope sys and no fence_sys "
         "precedes it"),
    ]  # fmt: skip


PTX = f"""\
.file 1 "k.cuh"
.visible .entry k()
{{
.loc 1 3 3
st.global.u32 [%rd1], %r1;
.loc 1 6 3
bar.sync 0;
.loc 1 8 5
fence.acq_rel.sys;
.loc 1 {PUBLISH} 5
PUBLISH_OP
ret;
}}
"""


@pytest.mark.parametrize(
    ("publish", "said"),
    [
        ("atom.global.sys.add.u32 %r2, [%rd2], 1;", None),
        ("red.global.add.u32 [%rd2], 1;", "publish is red.relaxed.gpu: no release at scope sys"),
        ("st.volatile.global.u32 [%rd2], 1;", None),  # volatile: relaxed at sys
        ("st.global.u32 [%rd2], 1;", "publish is st.weak: no release at scope sys"),
    ],
)
def test_a_relaxed_publish_after_a_fence_releases_as_far_as_its_own_scope(
    tmp_path, publish, said
):
    (tmp_path / "k.cuh").write_text(SOURCE.replace("ATOMIC", "atomicAdd"))
    sites, _ = parse_tree(tmp_path)
    module = parse_module(PTX.replace("PUBLISH_OP", publish), "k.ptx")
    found = [(f.line, f.message) for f in ptx_findings(sites, tmp_path, [("k", module)])]
    assert found == ([] if said is None else [(PUBLISH, said)])
