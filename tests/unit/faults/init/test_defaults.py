"""CUDA's primitives as init reads them: PTX mnemonics and atomics' member
calls, each the [target.contract] key it would be spelled under."""

from __future__ import annotations

import pytest

from faults.init.defaults import Reading, asm_mnemonics, member_reading, ptx_reading


@pytest.mark.parametrize(
    ("mnemonic", "reading"),
    [
        ("st.release.sys.global.u32", Reading("release.sys")),
        ("st.release.gpu.b32", Reading("release.gpu")),
        ("st.global.release.sys.b32", Reading("release.sys")),
        ("red.release.sys.global.add.u64", Reading("release.sys")),
        ("atom.acq_rel.gpu.global.cas.b32", Reading("release.gpu")),
        ("ld.acquire.sys.global.u64", Reading("acquire.sys")),
        ("ld.global.acquire.gpu.b32", Reading("acquire.gpu")),
        ("fence.acq_rel.sys", Reading("fence.sys")),
        ("fence.sc.cta", Reading("fence.cta")),
        ("membar.sys", Reading("fence.sys")),
        ("membar.gl", Reading("fence.gpu")),
        ("st.volatile.global.u32", Reading("store", volatile=True)),
        ("ld.volatile.global.u32", Reading("load", volatile=True)),
        ("ld.relaxed.sys.global.u64", Reading("load")),
        ("atom.global.add.u32", Reading("store")),
        ("bar.sync", Reading("barrier.block")),
        ("bar.warp.sync", Reading("barrier.warp")),
        ("ld.global.cg.u64", None),
        ("st.global.u32", None),
        ("fence.proxy.async", None),
        ("mov.u64", None),
    ],
)
def test_a_ptx_mnemonic_reads_as_its_key(mnemonic, reading):
    assert ptx_reading(mnemonic) == reading


def test_the_mnemonics_of_an_asm_statement_skip_its_predicates_and_braces():
    literals = (
        "{\\n\\t.reg .pred p;\\n\\tsetp.ne.b32 p, %4, 0;\\n\\t"
        "@p st.release.sys.b32 [%0], %1;\\n\\t}"
    )
    assert asm_mnemonics(literals) == ["setp.ne.b32", "st.release.sys.b32"]


@pytest.mark.parametrize(
    ("op", "arguments", "reading"),
    [
        ("store", "1, cuda::memory_order_release", Reading("release.sys")),
        ("store", "1, cuda::std::memory_order_relaxed", Reading("store")),
        ("load", "cuda::memory_order_acquire", Reading("acquire.sys")),
        ("load", "std::memory_order::relaxed", Reading("load")),
        ("fetch_add", "1, cuda::memory_order_acq_rel", Reading("release.sys")),
        ("fetch_add", "1, cuda::memory_order_relaxed", Reading("store")),
        (None, "cuda::memory_order_seq_cst, cuda::thread_scope_device", Reading("fence.gpu")),
        (None, "cuda::memory_order_acq_rel, cuda::thread_scope_block", Reading("fence.cta")),
        ("load", "", None),
    ],
)
def test_an_atomics_member_call_reads_by_its_order(op, arguments, reading):
    assert member_reading(op, arguments) == reading
