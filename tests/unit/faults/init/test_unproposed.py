"""Every ordering use init finds is proposed or listed with why, and a
wait whose barrier would swallow the release before it is proposed alone
(the one-block barrier of flashinfer's all-reduce fusion `sync()`, in
miniature); a helper's own definition is no use outside a site."""

from __future__ import annotations

from pathlib import Path

from faults.init import proposed, scan, starter_catalog, undeclared, unproposed
from invariants.sync.sites import Group, SiteKind, parse_file
from invariants.sync.spellings import ContractSpellings, call_pattern, primitive_pattern

FLAGS = """\
#pragma once
__device__ __forceinline__ void st_flag(int* addr, int flag) {
  asm volatile("st.global.release.sys.b32 [%1], %0;" ::"r"(flag), "l"(addr));
}
__device__ __forceinline__ int ld_flag(int* addr) {
  int flag;
  asm volatile("ld.global.acquire.sys.b32 %0, [%1];" : "=r"(flag) : "l"(addr));
  return flag;
}
"""

SYNC = """\
#include "flags.cuh"

__global__ void sync(int* data, int* flags, int* count, int value) {
  __syncthreads();
  atomicAdd(count, 1);
  if (threadIdx.x < 2) {
    data[threadIdx.x] = value;
    st_flag(flags + threadIdx.x, value);
    while (ld_flag(flags + 2 + threadIdx.x) != value) {
    }
  }
  __syncthreads();
}

__global__ void arrive(int* count) {
  atomicAdd(count, 1);
}
"""


SYNC_LINE = "__global__ void sync(int* data, int* flags, int* count, int value) {"
ARRIVE_LINE = "__global__ void arrive(int* count) {"


def tree(root: Path) -> Path:
    (root / "flags.cuh").write_text(FLAGS)
    (root / "sync.cu").write_text(SYNC)
    return root


def test_a_wait_is_proposed_alone_where_its_barrier_would_take_in_the_release(tmp_path):
    found = scan(tree(tmp_path), {})
    every, overlapped = proposed(found)
    said = [(p.name, p.kind, p.line, p.start, p.end, p.group, p.after) for p in every]
    assert said == [
        ("sync.sync.store", SiteKind.STORE, 7, 7, 7, None, None),
        ("sync.sync.release", SiteKind.RELEASE, 8, 8, 8, Group.THREAD, None),
        ("sync.sync.wait", SiteKind.WAIT, 9, 9, 10, Group.THREAD, None),
        # The two `atomicAdd(count, 1);` are one text, each found after the line above it.
        ("sync.sync.store_2", SiteKind.STORE, 5, 5, 5, None, SYNC_LINE),
        ("sync.arrive.store", SiteKind.STORE, 16, 16, 16, None, ARRIVE_LINE),
    ]
    assert "consumers thread: the barrier that ends at line 12" in every[2].notes[-1]
    assert overlapped == {}


def test_every_use_no_site_holds_is_listed_with_why(tmp_path):
    found = scan(tree(tmp_path), {})
    every, overlapped = proposed(found)
    kept, left_out = undeclared(found, every)
    missing = unproposed(found, kept, overlapped, [])
    assert (left_out, len(found.uses)) == (0, 6)
    assert [(m.use.line, m.use.key, m.why.split(" (")[0].split(":")[0]) for m in missing] == [
        (4, "barrier.block", "no proposed release or wait within 3 code lines of the barrier"),
        (12, "barrier.block", "no proposed release or wait within 3 code lines of the barrier"),
    ]
    text = starter_catalog(found, kept, "mini", "src", unproposed=missing)
    assert "# Not proposed: 2 of the 6 ordering uses found, each with why." in text
    assert "#   sync.cu:4 __syncthreads (barrier.block): no proposed release" in text


def test_a_lone_relaxed_store_is_proposed_as_a_store_site_where_it_can_be_anchored(tmp_path):
    (tmp_path / "count.cu").write_text(
        "__global__ void arrive(int* count, int* seen) {\n"
        "  atomicAdd(count, 1);\n"
        "  atomicMax(seen, 2);\n"
        "}\n"
    )
    every, overlapped = proposed(scan(tmp_path, {}))
    said = [(p.name, p.kind, p.start, p.end, p.at) for p in every]
    assert said == [
        ("count.arrive.store", SiteKind.STORE, 2, 2, "atomicAdd(count, 1);"),
        ("count.arrive.store_2", SiteKind.STORE, 3, 3, "atomicMax(seen, 2);"),
    ]
    assert overlapped == {}


def test_a_helpers_definition_is_no_use_but_its_calls_are(tmp_path):
    root = tree(tmp_path)
    spellings = scan(root, {}).spellings
    assert spellings["release.sys"] == ["st_flag"] and spellings["acquire.sys"] == ["ld_flag"]
    pattern = primitive_pattern(
        ContractSpellings(
            release={"sys": call_pattern("st_flag")}, acquire={"sys": call_pattern("ld_flag")}
        )
    )
    assert parse_file(root / "flags.cuh", check_primitives=True, primitives=pattern)[1] == []
    lines = [f.line for f in parse_file(root / "sync.cu", check_primitives=True,
                                       primitives=pattern)[1]]  # fmt: skip
    assert lines == [5, 8, 9, 16]  # atomicAdd, st_flag, ld_flag, atomicAdd: calls, no site


def test_a_wrapper_nothing_here_calls_keeps_its_body_as_uses(tmp_path):
    """flashinfer's `update()`: a volatile spin on the arrival counter, its
    callers outside the folder scanned; it is no spelling, its spin a use."""
    (tmp_path / "update.cuh").write_text(
        "__device__ void update(int* counter, int blocks) {\n"
        "  while (*reinterpret_cast<int volatile*>(counter) != blocks) {\n"
        "  }\n"
        "}\n"
    )
    found = scan(tmp_path, {})
    assert found.helpers == {}
    assert [(u.line, u.key, u.volatile) for u in found.uses] == [(2, "load", True)]
    [wait] = proposed(found)[0]
    assert (wait.kind, wait.start, wait.end) == (SiteKind.WAIT, 2, 3)


def test_wrappers_in_a_header_included_from_outside_the_folder_are_spellings(tmp_path):
    """CUB's case: the scanned folder (cub/agent) calls load and store
    wrappers defined in a header it includes from beside it (cub/detail),
    each an asm in an arch switch, longer than 12 lines but a few statements.
    They are found as spellings; the header's own primitives are no uses."""
    (tmp_path / "lib/detail").mkdir(parents=True)
    (tmp_path / "lib/agent").mkdir()
    (tmp_path / "lib/detail/strong.cuh").write_text(
        "__device__ void store_release(int* ptr, int val)\n{\n  SWITCH(\n    NEW,\n"
        '    (asm volatile("st.release.gpu.u32 [%0], %1;"\n'
        '                  :\n                  : "l"(ptr), "r"(val)\n'
        '                  : "memory");),\n'
        '    (__threadfence();\n     asm volatile("st.cg.u32 [%0], %1;"\n'
        '                  :\n                  : "l"(ptr), "r"(val)\n'
        '                  : "memory");));\n}\n'
    )
    (tmp_path / "lib/agent/tile.cuh").write_text(
        "#include <lib/detail/strong.cuh>\n"
        "__device__ void publish(int* value, int* status, int v) {\n"
        "  value[0] = v;\n  store_release(status, 1);\n}\n"
    )
    found = scan(tmp_path / "lib/agent", {})
    helper = found.helpers["store_release"]
    assert (helper.reading.key, helper.path) == ("release.gpu", "lib/detail/strong.cuh")
    assert [(u.path, u.line, u.key, u.name) for u in found.uses] == [
        ("tile.cuh", 4, "release.gpu", "store_release")
    ]
