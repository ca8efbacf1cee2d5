"""A barrier counts only where every thread of its group reaches it
(docs/synchronization.md, "The publish contract"): on the source, a barrier
under a condition that differs per thread (per warp, for a block's) is
absent; in the PTX, one control dependent on a branch whose guard does. Each
is named with its line and the condition, and this tree has none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from invariants.sync.divergence import Spread, splits
from invariants.sync.ptx_check import ptx_folder, read_index
from invariants.sync.ptx_divergence import Origin, Skip
from invariants.sync.ptx_read import parse_module
from invariants.sync.sites import Group, parse_tree, site_body
from invariants.sync.thread_conditions import Condition, ThreadConditions
from tests.unit.invariants.sync.test_contract import (
    CATALOG_TARGET,
    COMBINE_BF16,
    CSRC,
    DONE_RED,
    DONE_RELEASE,
    EPILOGUE_BF16,
    REPO,
    SOURCE_BF16,
    check,
    line_of,
    mutated,
    needs_nvrtc,
)

DONE_HEADER = (
    "    // @site cf.attention_dispatch.done_release kind=release producers=block scope=sys"
    " guards=cf.attention_dispatch.row_store\n"
)
PER_THREAD_SKIP = "which differs per thread: the threads that skip it are not covered"


# ------------------------------------------------------------- the source
KERNEL = """\
struct Index { int thread; int lane; int warp; };
__device__ Index index_of() {
  const int thread = static_cast<int>(threadIdx.x);
  return {thread, thread % 32, thread / 32};
}
__device__ int lane_asm() {
  int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
__global__ void k(const int* in, int* smem) {
  const auto [t, l, w] = index_of();
  const int n = in[0];
  smem[t] = n;
  const int shared_value = smem[0];
  if (t == 0) {
    __syncthreads();  // A
  } else {
    __syncthreads();  // B
  }
  if (blockIdx.x == 0) __syncthreads();  // C
  if (w == 1) {
    __syncwarp();  // D
  }
  for (int i = l; i < n; i += 32) __syncwarp();  // E
  if (t == 0) { n += 1; }
  __syncthreads();  // F
  if (lane_asm() == 0) __syncwarp();  // G
  if (shared_value > 0) __syncthreads();  // H
}
"""


def barriers_of(tmp_path: Path) -> dict[str, list[Condition]]:
    """Each marked barrier of KERNEL -> the conditions it lies under."""
    (tmp_path / "k.cuh").write_text(KERNEL)
    conditions = ThreadConditions(tmp_path)
    found = {}
    for number, line in enumerate(KERNEL.splitlines(), 1):
        mark = re.search(r"// ([A-Z])$", line)
        if mark:
            column = re.search(r"__sync\w+\(", line).start()
            found[mark[1]] = conditions.around(tmp_path / "k.cuh", number, column)
    return found


def test_each_condition_a_barrier_lies_under_and_how_far_it_spreads(tmp_path):
    lines = enumerate(KERNEL.splitlines(), 1)
    line = {text[-1]: number for number, text in lines if re.search(r"// [A-Z]$", text)}
    t_if = line["A"] - 1
    assert barriers_of(tmp_path) == {
        "A": [Condition("if (t == 0)", t_if, Spread.PER_THREAD)],
        "B": [Condition("else of if (t == 0)", t_if, Spread.PER_THREAD)],
        "C": [Condition("if (blockIdx.x == 0)", t_if + 5, Spread.PER_BLOCK)],
        "D": [Condition("if (w == 1)", line["D"] - 1, Spread.PER_WARP)],
        "E": [Condition("for (int i = l; i < n; i += 32)", line["E"], Spread.PER_THREAD)],
        "F": [],  # the condition before it is closed
        "G": [Condition("if (lane_asm() == 0)", line["G"], Spread.PER_THREAD)],
        # what went through memory is not followed
        "H": [Condition("if (shared_value > 0)", line["H"], Spread.UNIFORM)],
    }


@pytest.mark.parametrize(
    "spread, group, parts",
    [
        (Spread.PER_WARP, Group.WARP, False),  # a warp takes a per-warp branch whole
        (Spread.PER_WARP, Group.BLOCK, True),
        (Spread.PER_THREAD, Group.WARP, True),
        (Spread.PER_BLOCK, Group.BLOCK, False),  # every thread of the block alike
        (Spread.PER_BLOCK, Group.GRID, True),
        (Spread.UNIFORM, Group.GRID, False),
        (Spread.PER_THREAD, Group.THREAD, False),
    ],
)
def test_a_condition_parts_a_group_only_where_it_differs_inside_it(spread, group, parts):
    assert splits(spread, group) is parts


def test_this_tree_has_no_barrier_some_of_its_group_skip():
    sites, _ = parse_tree(CSRC)
    conditions, barriers = ThreadConditions(CSRC), 0
    for site in sites:
        group = site.producers or site.consumers
        for offset, text in enumerate(site_body(site)):
            for call in re.finditer(r"\b(__syncthreads|__syncwarp)\s*\(", text.split("//")[0]):
                barriers += 1
                around = conditions.around(site.path, site.start + 1 + offset, call.start())
                assert not any(splits(c.spread, group) for c in around), (site.name, around)
    assert barriers == 14


# ---------------------------------------------------------------- the PTX
PTX_HEAD = '.file 1 "k.cuh"\n.visible .entry k()\n{\n.loc 1 1 1\n'


def skips(body: str) -> dict[int, Skip]:
    """Every barrier of a kernel made of `body` -> how some threads skip it."""
    function = parse_module(PTX_HEAD + body + "ret;\n}\n", "k.ptx").functions["k"]
    code = function.instructions
    barriers = [i for i, ins in enumerate(code) if ins.base == "bar"]
    return {
        i: skip for i in barriers if (skip := function.divergence.skip(i)) is not None
    }


BRANCH_AROUND = "setp.ne.s32 %p1, {r}, 0;\n@%p1 bra $L_skip;\nbar.sync 0;\n$L_skip:\n"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("mov.u32 %r1, %tid.x;\n", {3: Skip(2, Origin(Spread.PER_THREAD, "%tid.x"))}),
        ("mov.u32 %r1, %laneid;\n", {3: Skip(2, Origin(Spread.PER_THREAD, "%laneid"))}),
        ("mov.u32 %r1, %ctaid.x;\n", {3: Skip(2, Origin(Spread.PER_BLOCK, "%ctaid.x"))}),
        ("mov.u32 %r1, %ntid.x;\n", {}),
        (
            "mov.u32 %r0, %tid.x;\nshr.u32 %r1, %r0, 5;\n",
            {4: Skip(3, Origin(Spread.PER_WARP, "%tid.x"))},
        ),
        (
            "mov.u32 %r0, %tid.x;\nand.b32 %r1, %r0, 31;\n",
            {4: Skip(3, Origin(Spread.PER_THREAD, "%tid.x"))},
        ),
        (  # the guard of a predicated move spreads to its result
            "mov.u32 %r0, %tid.x;\nsetp.eq.s32 %p0, %r0, 3;\nmov.u32 %r1, 0;\n"
            "@%p0 mov.u32 %r1, 1;\n",
            {6: Skip(5, Origin(Spread.PER_THREAD, "%tid.x"))},
        ),
        (
            "mov.u32 %r0, %tid.x;\nvote.sync.any.pred %p0, %r0, -1;\nselp.u32 %r1, 1, 0, %p0;\n",
            {5: Skip(4, Origin(Spread.PER_WARP, "%tid.x"))},
        ),
    ],
)
def test_a_barrier_under_a_branch_on_the_thread_is_skipped_by_some(source, expected):
    assert skips(source + BRANCH_AROUND.format(r="%r1")) == expected


def test_a_predicated_exit_on_the_thread_skips_every_barrier_after_it():
    body = "mov.u32 %r1, %tid.x;\nsetp.ne.s32 %p1, %r1, 0;\n@%p1 ret;\nbar.sync 0;\n"
    assert skips(body) == {3: Skip(2, Origin(Spread.PER_THREAD, "%tid.x"))}


def test_a_barrier_every_thread_reaches_is_no_skip():
    joined = "mov.u32 %r1, %tid.x;\n" + BRANCH_AROUND.format(r="%r1").replace(
        "bar.sync 0;\n$L_skip:\n", "st.global.u32 [%rd1], %r1;\n$L_skip:\nbar.sync 0;\n"
    )
    # a uniform loop: its barrier is met again after a branch on the thread, yet by every thread
    loop = (
        "mov.u32 %r1, %tid.x;\nmov.u32 %r2, 0;\n$L_loop:\nbar.sync 0;\n"
        "setp.ne.s32 %p1, %r1, 0;\n@%p1 bra $L_next;\nst.global.u32 [%rd1], %r2;\n$L_next:\n"
        "add.s32 %r2, %r2, 1;\nsetp.lt.s32 %p2, %r2, 4;\n@%p2 bra $L_loop;\n"
    )
    assert (skips(joined), skips(loop)) == ({}, {})


# ------------------------------------------------------------ the mutants
@pytest.fixture(scope="module")
def ptx_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("reach") / "ptx"


@needs_nvrtc
def test_the_block_barrier_moved_under_thread_zero(tmp_path, ptx_cache):
    """Issue 40's second approval: the barrier is on thread 0's path, not the others'."""
    csrc = mutated(
        tmp_path,
        "impls/attention_dispatch.cuh",
        DONE_HEADER + "    __syncthreads();\n    if (thread_idx == 0) {\n",
        DONE_HEADER + "    if (thread_idx == 0) {\n      __syncthreads();\n",
    )
    path = csrc / "impls/attention_dispatch.cuh"
    publish = line_of(path, DONE_RED, after=DONE_RELEASE)
    barrier = line_of(path, "__syncthreads();", after=DONE_RELEASE)
    where = f"{path}:{publish}: cf.attention_dispatch.done_release"
    missing = "no bar.sync between the block's stores and red.release.sys on every path"
    ptx = (
        f"{missing}: the bar.sync at line {barrier} is under the branch at line {barrier - 1}"
        f" on %tid.x, {PER_THREAD_SKIP}"
    )
    assert check(csrc, ptx_cache) == [
        f"{where}: no __syncthreads before the publish red_add_release_sys: the __syncthreads"
        f" at line {barrier} is under `if (thread_idx == 0)`, {PER_THREAD_SKIP}",
        f"{where} [{SOURCE_BF16.format('false')}]: {ptx}",
        f"{where} [{SOURCE_BF16.format('true')}]: {ptx}",
    ]


@needs_nvrtc
def test_the_warp_sync_moved_under_lane_zero(tmp_path, ptx_cache):
    csrc = mutated(
        tmp_path,
        "impls/ffn_combine.cuh",
        "    __syncwarp();\n    if (lane_idx == 0) {\n",
        "    if (lane_idx == 0) {\n      __syncwarp();\n",
    )
    path = csrc / "impls/ffn_combine.cuh"
    barrier = line_of(path, "__syncwarp();", after="// @site cb.ffn_combine.row_release")
    where = f"{path}:{barrier + 2}: cb.ffn_combine.row_release"
    assert check(csrc, ptx_cache) == [
        f"{where}: no __syncwarp before the publish st_release_sys: the __syncwarp at line"
        f" {barrier} is under `if (lane_idx == 0)`, {PER_THREAD_SKIP}",
        f"{where} [{COMBINE_BF16}]: no bar.warp.sync between the warp's stores and"
        f" st.release.sys on every path: the bar.warp.sync at line {barrier} is under the"
        f" branch at line {barrier - 1} on %tid.x, {PER_THREAD_SKIP}",
    ]


@needs_nvrtc
def test_the_barrier_after_a_wait_moved_under_the_waiting_thread(tmp_path, ptx_cache):
    wait = (
        "    wait_until(peer_ptr<const u64>(p, rank_idx, p.off_prefix_ready), epoch,\n"
        '               "cf.ffn_stream_expand.prefix_wait", p);\n'
    )
    csrc = mutated(
        tmp_path,
        "impls/ffn_stream_expand.cuh",
        "  if (thread_idx == 0)\n" + wait + "  __syncthreads();\n",
        "  if (thread_idx == 0) {\n" + wait + "    __syncthreads();\n  }\n",
    )
    path = csrc / "impls/ffn_stream_expand.cuh"
    wait = line_of(path, "wait_until(", after="// @site cf.ffn_stream_expand.prefix_wait")
    where = f"{path}:{wait}: cf.ffn_stream_expand.prefix_wait"
    ptx = (
        "no bar.sync after the acquire on every path before the block reads: the bar.sync at"
        f" line {wait + 2} is under the branch at line {wait - 1} on %tid.x, {PER_THREAD_SKIP}"
    )
    assert check(csrc, ptx_cache) == [
        f"{where}: no __syncthreads after the acquire wait_until: the __syncthreads at line"
        f" {wait + 2} is under `if (thread_idx == 0)`, {PER_THREAD_SKIP}",
        f"{where} [{EPILOGUE_BF16.format('false')}]: {ptx}",
        f"{where} [{EPILOGUE_BF16.format('true')}]: {ptx}",
    ]


@needs_nvrtc
def test_the_threads_that_return_before_the_barrier_are_not_covered(tmp_path, ptx_cache):
    """An early exit is the PTX's to see: on the source the barrier lies under no condition."""
    csrc = mutated(
        tmp_path,
        "impls/ffn_place.cuh",
        "  __syncthreads();\n  if (thread_idx == 0) {\n",
        "  if (thread_idx != 0) return;\n  __syncthreads();\n  if (thread_idx == 0) {\n",
    )
    path = csrc / "impls/ffn_place.cuh"
    returns = line_of(path, "return;", after="// @site cf.ffn_place.prefix_release")
    publish = line_of(path, "ptx::st_release_sys(", after="// @site cf.ffn_place.prefix_release")
    # the compiler parts the threads once, at thread 0's store of the protocol before it
    branch = line_of(path, "if (thread_idx == 0) *local_ptr<i32>(p.protocol_log)")
    assert check(csrc, ptx_cache) == [
        f"{path}:{publish}: cf.ffn_place.prefix_release [ffn_place<kNumThreads=512>]: no bar.sync"
        " between the block's stores and st.release.sys on every path: the bar.sync at line"
        f" {returns + 1} is under the branch at line {branch} on %tid.x, {PER_THREAD_SKIP}"
    ]


@needs_nvrtc
def test_no_barrier_of_any_variant_is_skipped_within_its_group(ptx_cache):
    """This tree: every bar.sync is reached by the whole block, every
    bar.warp.sync by its whole warp (some under a branch on the warp's index)."""
    folder, _ = ptx_folder(REPO, CSRC, CATALOG_TARGET, ptx_cache)
    per_warp = 0
    for _, module in read_index(folder):
        for function in module.functions.values():
            for index, ins in enumerate(function.instructions):
                group = ins.barrier()
                skip = function.divergence.skip(index) if group else None
                assert skip is None or not splits(skip.origin.spread, group), (module.name, index)
                per_warp += skip is not None
    assert per_warp > 0


TWO_LOOPS = """\
__global__ void k(int n) {
  const int thread_idx = threadIdx.x;
  const int warp_idx = thread_idx / 32;
  for (int token_idx = thread_idx; token_idx < n; token_idx += 512) n -= 0;
  for (int token_idx = blockIdx.x * 4 + warp_idx; token_idx < n; token_idx += 64) {
    __syncwarp();
  }
  for (int i = warp_idx; i < n; i += thread_idx) __syncwarp();
}
"""


def test_a_loop_variable_is_its_own_loops_not_another_of_that_name(tmp_path):
    """Two grid-stride loops over `token_idx`, the first per thread, the
    second per warp: the warp's loop parts no warp (a neutral commit of the
    history, 0478c9b8, was flagged for it); a step per thread still does."""
    (tmp_path / "k.cuh").write_text(TWO_LOOPS)
    conditions = ThreadConditions(tmp_path)
    [warp_loop] = conditions.around(tmp_path / "k.cuh", 6, 4)
    [stepped] = conditions.around(tmp_path / "k.cuh", 8, 49)
    assert (warp_loop.line, warp_loop.spread) == (5, Spread.PER_WARP)
    assert (stepped.line, stepped.spread) == (8, Spread.PER_THREAD)


MASK_LOOP = """\
__global__ void k(const long* topk, int n) {
  const int lane_idx = threadIdx.x % 32;
  const long expert = topk[lane_idx];
  const unsigned mask = __reduce_or_sync(0xffffffffu, expert >= 0 ? 1u << expert : 0u);
  for (unsigned pending = mask; pending != 0; pending &= pending - 1) {
    const int ffn = __ffs(pending) - 1;
    __syncwarp();
  }
  for (int ffn = lane_idx; ffn < n; ffn += 32) n -= 0;
  if (__ballot_sync(0xffffffffu, expert > 0) != 0) __syncwarp();
  if (__shfl_sync(0xffffffffu, lane_idx, lane_idx) > 3) __syncwarp();
}
"""


def test_a_warp_collectives_value_parts_no_warp(tmp_path):
    """A loop over the bits of a warp's `__reduce_or_sync` (0478c9b8's
    history, e0ac0218 and 13 more commits were flagged for it): the step's
    `pending - 1` is read up to its header's `)`, not into the body's `ffn`,
    which another loop gives per lane; a ballot is one value per warp, a
    shuffle from a lane-chosen lane is not."""
    (tmp_path / "k.cuh").write_text(MASK_LOOP)
    conditions = ThreadConditions(tmp_path)
    lines = MASK_LOOP.splitlines()

    def spreads(number: int) -> list[Spread]:
        column = lines[number - 1].index("__syncwarp")
        return [c.spread for c in conditions.around(tmp_path / "k.cuh", number, column)]

    assert spreads(7) == [Spread.PER_WARP]
    assert spreads(10) == [Spread.PER_WARP]
    assert spreads(11) == [Spread.PER_THREAD]


# An unaligned barrier (a cluster barrier's wait) counts the threads that
# arrive wherever they do: a helper inlined in both arms of a branch is one
# barrier every thread meets; in one arm only, or an aligned bar.sync in both,
# some threads skip it.
BOTH_ARMS = (
    "mov.u32 %r1, %tid.x;\nsetp.ne.s32 %p1, %r1, 0;\n@%p1 bra $L_else;\n{barrier}\n"
    "bra.uni $L_end;\n$L_else:\n{barrier}\n$L_end:\n"
)
ONE_ARM = "mov.u32 %r1, %tid.x;\nsetp.ne.s32 %p1, %r1, 0;\n@%p1 bra $L_end;\n{barrier}\n$L_end:\n"


@pytest.mark.parametrize(
    "body, barrier, skipped_by_some",
    [
        (BOTH_ARMS, "barrier.cluster.wait;", False),
        (ONE_ARM, "barrier.cluster.wait;", True),
        (BOTH_ARMS, "bar.sync 0;", True),
        (BOTH_ARMS, "barrier.cluster.wait.aligned;", True),
    ],
)
def test_an_unaligned_barrier_in_every_arm_is_one_every_thread_meets(
    body, barrier, skipped_by_some
):
    from invariants.sync.ptx_check import skipped

    ptx = PTX_HEAD + body.format(barrier=barrier) + "ret;\n}\n"
    function = parse_module(ptx, "k.ptx").functions["k"]
    found = [i for i, ins in enumerate(function.instructions) if ins.base in ("bar", "barrier")]
    assert found and all(function.instructions[i].barrier() == Group.BLOCK for i in found)
    assert {skipped(function, i, Group.BLOCK) for i in found} == {skipped_by_some}
