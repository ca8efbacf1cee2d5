"""A publish made in a helper function (docs/synchronization.md, "The publish
contract"): a barrier object's member that releases and waits, defined above
the kernel whose stores it publishes, with its asm in member functions of the
same file. On the source, the guarded store's lines after the release's are
no finding (another function: the call orders them); in the PTX, an inlined
instruction lies on every line of its inline chain, so the asm counts at the
site's call of the helper. Sources and PTX are written here, no compiler."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from invariants.sync.contract import check_contracts
from invariants.sync.functions import enclosing
from invariants.sync.ptx_check import ptx_findings
from invariants.sync.ptx_read import parse_module
from invariants.sync.sites import parse_tree
from invariants.sync.spellings import ContractSpellings, call_pattern

SOURCE = """\
struct Barrier {
  __device__ void sync() {
    __syncthreads();
    if (threadIdx.x == 0) {
      // @site k.flag_release kind=release producers=thread scope=sys guards=k.store
      st_flag(flag, 1);
      // @end k.flag_release
      // @site k.flag_wait kind=wait consumers=thread scope=sys guards=k.store
      while (ld_flag(flag) != 1) {
      }
      // @end k.flag_wait
    }
    __syncthreads();
  }
  __device__ void st_flag(int* addr, int v) {
    asm volatile("st.global.release.sys.b32 [%1], %0;" ::"r"(v), "l"(addr));
  }
  __device__ int ld_flag(int* addr) {
    int v;
    asm volatile("ld.global.acquire.sys.b32 %0, [%1];" : "=r"(v) : "l"(addr));
    return v;
  }
  int* flag;
};
__global__ void k(int* data, Barrier barrier) {
  // @site k.store kind=store
  data[threadIdx.x] = 1;
  // @end k.store
  barrier.sync();
}
"""
SYNC_CALL, RELEASE_CALL, WAIT_CALL, STORE = 29, 6, 9, 27  # the lines the PTX comes from
ST_ASM, LD_ASM = 16, 20


@dataclass(frozen=True)
class Target:  # a ContractTarget
    name: str = "inlined"
    sources: str = "src"
    anchors: tuple = ()
    contract: ContractSpellings | None = field(
        default_factory=lambda: ContractSpellings(
            barrier={"block": call_pattern("__syncthreads")},
            release={"sys": call_pattern("st_flag"), "gpu": call_pattern("st_flag_gpu")},
            acquire={"sys": call_pattern("ld_flag"), "gpu": call_pattern("ld_flag_gpu")},
        )
    )
    env: dict = field(default_factory=dict)
    timeout_s: float = 10.0


def tree(tmp_path: Path, source: str = SOURCE) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cuh").write_text(source)
    return tmp_path


def test_the_source_lines_are_the_ones_the_ptx_names(tmp_path):
    lines = SOURCE.splitlines()
    assert lines[SYNC_CALL - 1].strip() == "barrier.sync();"
    assert lines[RELEASE_CALL - 1].strip() == "st_flag(flag, 1);"
    assert lines[WAIT_CALL - 1].strip().startswith("while (ld_flag(flag)")
    assert lines[STORE - 1].strip() == "data[threadIdx.x] = 1;"
    assert lines[ST_ASM - 1].strip().startswith('asm volatile("st.global.release')
    assert lines[LD_ASM - 1].strip().startswith('asm volatile("ld.global.acquire')


def test_a_line_is_in_the_innermost_function_that_holds_it(tmp_path):
    path = tree(tmp_path) / "src" / "k.cuh"
    assert path.read_text()[enclosing(path, RELEASE_CALL).name :].startswith("sync()")
    assert path.read_text()[enclosing(path, ST_ASM).name :].startswith("st_flag(int*")
    assert path.read_text()[enclosing(path, STORE).name :].startswith("k(int* data")
    assert enclosing(path, 1) is None


def test_a_release_in_a_member_above_the_kernel_is_no_finding(tmp_path):
    report = check_contracts(tree(tmp_path), Target(), ptx=False)
    assert (report.sites_checked, [str(v) for v in report.violations]) == (2, [])


def test_a_release_above_its_guarded_store_in_one_function_is_a_finding(tmp_path):
    moved = SOURCE.replace("  barrier.sync();\n}\n", "}\n").replace(
        "__global__ void k(int* data, Barrier barrier) {\n",
        "__global__ void k(int* data, Barrier barrier) {\n"
        "  // @site k.flag_release kind=release producers=thread scope=sys guards=k.store\n"
        "  barrier.st_flag(barrier.flag, 1);\n"
        "  // @end k.flag_release\n",
    )
    moved = moved.replace(
        "      // @site k.flag_release kind=release producers=thread scope=sys guards=k.store\n"
        "      st_flag(flag, 1);\n"
        "      // @end k.flag_release\n",
        "",
    )
    root = tree(tmp_path, moved)
    report = check_contracts(root, Target(), ptx=False)
    assert [(v.line, v.site, v.message) for v in report.violations] == [
        (23, "k.flag_release",
         "the guarded site k.store (lines 26-28) does not end before it starts"),
    ]  # fmt: skip


# The PTX nvcc writes for k: each `.loc` names its nearest call site only,
# after a `.loc` of that call site itself.
PTX = f"""\
.file 1 "src/k.cuh"
.visible .entry k()
{{
.loc 1 {STORE} 3
st.global.u32 [%rd1], %r1;
.loc 1 {SYNC_CALL} 3
.loc 1 3 5, function_name $L1, inlined_at 1 {SYNC_CALL} 3
bar.sync 0;
.loc 1 {RELEASE_CALL} 7, function_name $L1, inlined_at 1 {SYNC_CALL} 3
.loc 1 {ST_ASM} 5, function_name $L2, inlined_at 1 {RELEASE_CALL} 7
st.global.release.sys.b32 [%rd2], %r2;
$L_spin:
.loc 1 {WAIT_CALL} 7, function_name $L1, inlined_at 1 {SYNC_CALL} 3
.loc 1 {LD_ASM} 5, function_name $L3, inlined_at 1 {WAIT_CALL} 7
ld.global.ACQUIRE.b32 %r3, [%rd2];
.loc 1 {WAIT_CALL} 7, function_name $L1, inlined_at 1 {SYNC_CALL} 3
setp.ne.s32 %p1, %r3, 1;
@%p1 bra $L_spin;
.loc 1 13 5, function_name $L1, inlined_at 1 {SYNC_CALL} 3
bar.sync 0;
ret;
}}
"""


def test_an_inlined_instruction_carries_its_whole_inline_chain():
    function = parse_module(PTX.replace("ACQUIRE", "acquire.sys"), "k.ptx").functions["k"]
    chains = [ins.loc.chain for ins in function.instructions]
    assert chains[:3] == [
        ((1, STORE),),
        ((1, 3), (1, SYNC_CALL)),
        ((1, ST_ASM), (1, RELEASE_CALL), (1, SYNC_CALL)),
    ]
    assert function.chains_in(1)[2] == (ST_ASM, RELEASE_CALL, SYNC_CALL)
    assert function.chains_in(2)[2] == ()
    assert function.lines_in(1)[:3] == [STORE, 3, ST_ASM]


def test_a_position_inlined_at_two_calls_takes_the_latest_caller():
    text = (
        '.file 1 "k.cuh"\n.visible .entry k()\n{\n'
        ".loc 1 30 3\n.loc 1 6 7, function_name $L1, inlined_at 1 30 3\n"
        ".loc 1 16 5, function_name $L2, inlined_at 1 6 7\nst.global.u32 [%rd1], %r1;\n"
        ".loc 1 40 3\n.loc 1 6 7, function_name $L1, inlined_at 1 40 3\n"
        ".loc 1 16 5, function_name $L2, inlined_at 1 6 7\nst.global.u32 [%rd1], %r1;\n"
        "ret;\n}\n"
    )
    function = parse_module(text, "k.ptx").functions["k"]
    assert [ins.loc.chain for ins in function.instructions[:2]] == [
        ((1, 16), (1, 6), (1, 30)),
        ((1, 16), (1, 6), (1, 40)),
    ]


@pytest.mark.parametrize(
    "acquire, found",
    [
        ("acquire.sys", []),
        ("acquire.gpu", [(WAIT_CALL, "k.flag_wait", "the wait acquires below scope sys")]),
        (
            "relaxed.sys",
            [
                (WAIT_CALL - 1, "k.flag_wait", "no ld.acquire.sys in the wait (nor a call that acquires,"
                 " nor a relaxed load then fence.acq_rel.sys)"),
            ],
        ),
    ],
)  # fmt: skip
def test_the_asm_of_an_inlined_helper_counts_at_the_sites_call(tmp_path, acquire, found):
    sources = tree(tmp_path) / "src"
    sites = [s for s in parse_tree(sources)[0] if s.kind in ("release", "wait")]
    module = parse_module(PTX.replace("ACQUIRE", acquire), "k.ptx")
    violations = ptx_findings(sites, sources, [("k", module)])
    assert [(v.line, v.site, v.message) for v in violations] == found
