"""The guarded data on the PTX (invariants/sync/ptx_dataflow.py and the
publish contract's reads and stores of it, invariants/sync/ptx_check.py):
which parameter fields a pointer is built from, the data a store site
guards (what its stores reach that its flag does not), and the four ways a
kernel gets it wrong: a read on the read-only path, a read above the wait,
a wait only some blocks make, a store after its release. Sources and PTX are
written here, no compiler."""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants.sync.ptx_check import guarded_data, ptx_findings
from invariants.sync.ptx_dataflow import Field, access_bases, register_bases
from invariants.sync.ptx_read import parse_module
from invariants.sync.sites import parse_tree

# Both kernels take `const P* p`: p->data at +8 (the rows), p->flags at +16.
SOURCE = """\
__global__ void producer(const P* p) {
  // @site k.store kind=store
  p->data[threadIdx.x] = threadIdx.x;
  // @end k.store
  // @site k.release kind=release producers=block scope=sys guards=k.store
  __syncthreads();
  if (threadIdx.x == 0) st_release(p->flags, 1);
  // @end k.release
}
__global__ void consumer(const P* p, int* out) {
  // @site k.wait kind=wait consumers=block scope=sys guards=k.store
  if (threadIdx.x == 0) while (ld_acquire(p->flags) != 1) {}
  __syncthreads();
  // @end k.wait
  out[threadIdx.x] = p->data[threadIdx.x];
}
"""
STORE, RELEASE, WAIT, READ = 3, 7, 12, 15

PRODUCER = f"""\
.visible .entry producer(
.param .u64 producer_param_0
)
{{
.loc 1 {STORE} 3
ld.param.u64 %rd1, [producer_param_0];
cvta.to.global.u64 %rd2, %rd1;
ld.global.nc.u64 %rd3, [%rd2+8];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd4, %r1, 4;
add.s64 %rd5, %rd3, %rd4;
STORE_ROW
.loc 1 6 3
bar.sync 0;
.loc 1 {RELEASE} 3
setp.ne.s32 %p1, %r1, 0;
@%p1 bra $L_done;
ld.global.nc.u64 %rd6, [%rd2+16];
st.release.sys.global.u32 [%rd6], 1;
$L_done:
LATE_STORE
ret;
}}
"""
CONSUMER = f"""\
.visible .entry consumer(
.param .u64 consumer_param_0,
.param .u64 consumer_param_1
)
{{
.loc 1 {WAIT} 3
ld.param.u64 %rd1, [consumer_param_0];
cvta.to.global.u64 %rd2, %rd1;
ld.global.nc.u64 %rd3, [%rd2+16];
ld.global.nc.u64 %rd7, [%rd2+8];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd4, %r1, 4;
add.s64 %rd5, %rd7, %rd4;
EARLY_READ
WHO_WAITS
@%p1 bra $L_waited;
$L_spin:
ld.acquire.sys.global.u32 %r2, [%rd3];
setp.ne.s32 %p2, %r2, 1;
@%p2 bra $L_spin;
$L_waited:
.loc 1 13 3
bar.sync 0;
.loc 1 {READ} 3
READ_ROW
ret;
}}
"""
ROW_READ = "ld.global.cg.u32 %r3, [%rd5];"
THREAD_ZERO = "setp.ne.s32 %p1, %r1, 0;"
BLOCK_ZERO = "mov.u32 %r9, %ctaid.x;\nor.b32 %r8, %r1, %r9;\nsetp.ne.s32 %p1, %r8, 0;"


def module(producer: dict[str, str] | None = None, consumer: dict[str, str] | None = None):
    """The two kernels' module, each placeholder as given (a row store and
    read where they belong, nothing else, by default)."""
    return parse_module(module_text(producer, consumer), "k.ptx")


def module_text(producer: dict[str, str] | None = None, consumer: dict[str, str] | None = None):
    """`module`'s PTX text."""
    texts = []
    for text, given, default in (
        (PRODUCER, producer, {"STORE_ROW": "st.global.u32 [%rd5], %r1;", "LATE_STORE": ""}),
        (CONSUMER, consumer, {"EARLY_READ": "", "WHO_WAITS": THREAD_ZERO, "READ_ROW": ROW_READ}),
    ):
        for key, value in {**default, **(given or {})}.items():
            text = text.replace(key, value)
        texts.append(text)
    return '.file 1 "k.cu"\n' + "".join(texts)


@pytest.fixture
def sources(tmp_path) -> Path:
    (tmp_path / "k.cu").write_text(SOURCE)
    return tmp_path


def findings(sources: Path, **placeholders) -> list[tuple[int, str, str]]:
    producer = {k: v for k, v in placeholders.items() if k in ("STORE_ROW", "LATE_STORE")}
    consumer = {k: v for k, v in placeholders.items() if k not in producer}
    sites, _ = parse_tree(sources)
    found = ptx_findings(sites, sources, [("k", module(producer, consumer))])
    return [(f.line, f.site, f.message) for f in found]


def test_a_pointer_has_the_fields_it_is_built_from_not_its_index():
    consumer = module().functions["consumer"]
    bases = register_bases(consumer.instructions)
    rows = Field(0, (0, 8))  # consumer_param_0, then the struct's +8
    assert bases["%rd7"] == bases["%rd5"] == {rows}
    assert bases["%rd3"] == {Field(0, (0, 16))}
    assert "%rd4" not in bases and "%r1" not in bases  # the index carries none
    [read] = [i for i in consumer.instructions if i.opcode == "ld.global.cg.u32"]
    assert access_bases(read, bases) == {rows}


def test_the_guarded_data_is_what_the_stores_reach_and_the_flag_does_not(sources):
    sites, _ = parse_tree(sources)
    assert guarded_data(sites, sources, [("k", module())]) == {"k.store": {Field(0, (0, 8))}}


def test_the_right_kernels_hold_the_contract(sources):
    assert findings(sources) == []


def test_a_read_on_the_read_only_path_is_a_finding(sources):
    nc = "ld.global.nc.u32 %r3, [%rd5];"
    assert findings(sources, READ_ROW=nc) == [
        (READ, "k.wait", "reads the data it guards with ld.global.nc.u32: the read-only path "
         "is not coherent with a peer's stores, no acquire orders it"),
    ]  # fmt: skip


def test_a_read_above_the_wait_is_a_finding(sources):
    early = f".loc 1 10 3\n{ROW_READ}\n.loc 1 {WAIT} 3"  # on the kernel's first line
    assert findings(sources, EARLY_READ=early, READ_ROW="") == [
        (10, "k.wait", "reads the data it guards with ld.global.cg.u32 before any acquire "
         "of its wait in the iteration (a load above the wait)"),
    ]  # fmt: skip


def test_a_wait_only_block_zero_makes_is_a_finding_for_every_block_that_reads(sources):
    assert findings(sources, WHO_WAITS=BLOCK_ZERO) == [
        (READ, "k.wait", f"reads the data it guards after a wait only some blocks make: the "
         f"acquire is under the branch at line {WAIT} on %ctaid.x, which differs per block, and "
         "the blocks that skip it read with no acquire"),
    ]  # fmt: skip


def test_a_store_after_the_release_is_a_finding(sources):
    # the store site's store issued after the release (a helper called first, say)
    late = f".loc 1 {STORE} 3\nst.global.u32 [%rd5], %r1;"
    assert findings(sources, STORE_ROW="", LATE_STORE=late) == [
        (STORE, "k.release", "stores the data it guards with st.global.u32 after its release "
         "on every path of the iteration: no release follows the store"),
    ]  # fmt: skip


def test_a_read_of_other_data_is_none_of_the_waits_business(sources):
    other = "ld.global.nc.u64 %rd9, [%rd2+24];\nadd.s64 %rd5, %rd9, %rd4;\nld.global.nc.u32 %r3, [%rd5];"
    assert findings(sources, READ_ROW=other.replace("%rd5", "%rd10")) == []
