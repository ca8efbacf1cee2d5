"""init's proposals on a small synthetic tree, exactly, and on afdep's own
sources against the sites their `// @site` comments declare."""

from __future__ import annotations

import tomllib
from pathlib import Path

from faults.catalog import load_catalog
from faults.catalog.anchors import site_tables
from faults.init import Form, propose, scan, starter_catalog, undeclared
from invariants.sync.sites import Group, Scope, SiteKind, parse_tree
from tests.unit.faults.init.tree import write_tree

REPO = Path(__file__).parents[4]
AFDEP_SPELLINGS = {  # catalogs/afdep.toml's [target.contract]
    "barrier.warp": "__syncwarp",
    "barrier.block": "__syncthreads",
    "release.sys": "st_release_sys|red_add_release_sys",
    "acquire.sys": "ld_acquire_sys|wait_until",
    "fence.sys": "fence_acq_rel_sys",
    "store": "st_relaxed_sys",
    "load": "ld_relaxed_sys",
}


def test_the_asm_wrappers_become_spellings_and_their_callers_the_uses(tmp_path):
    found = scan(write_tree(tmp_path), {})
    assert {name: (h.reading.key, h.path, h.line) for name, h in found.helpers.items()} == {
        "st_flag_release": ("release.sys", "flags.cuh", 2),
        "ld_flag_acquire": ("acquire.sys", "flags.cuh", 6),
    }
    assert [(u.path, u.line, u.key, u.name, u.form, u.function) for u in found.uses] == [
        ("kernels.cu", 6, "barrier.block", "__syncthreads", Form.CALL, "producer"),
        ("kernels.cu", 8, "release.sys", "st_flag_release", Form.CALL, "producer"),
        ("kernels.cu", 14, "acquire.sys", "ld_flag_acquire", Form.CALL, "consumer"),
        ("kernels.cu", 17, "barrier.block", "__syncthreads", Form.CALL, "consumer"),
        ("legacy.cu", 2, "load", "volatile", Form.VOLATILE, "legacy_wait"),
    ]
    assert found.spellings == {
        "barrier.block": ["__syncthreads"],
        "release.sys": ["st_flag_release"],
        "acquire.sys": ["ld_flag_acquire"],
    }


def test_the_synthetic_tree_gets_exactly_these_sites(tmp_path):
    proposals = propose(scan(write_tree(tmp_path), {}))
    said = [
        (p.name, p.kind, p.path, p.line, p.start, p.end, p.group, p.scope, p.guards)
        for p in proposals
    ]
    store = "kernels.producer.store"
    assert said == [
        (store, SiteKind.STORE, "kernels.cu", 4, 4, 5, None, None, None),
        ("kernels.producer.release", SiteKind.RELEASE, "kernels.cu", 8, 6, 9, Group.BLOCK,
         Scope.SYS, store),
        ("kernels.consumer.wait", SiteKind.WAIT, "kernels.cu", 14, 13, 17, Group.BLOCK,
         Scope.SYS, store),
        ("legacy.legacy_wait.wait", SiteKind.WAIT, "legacy.cu", 2, 2, 3, Group.THREAD,
         Scope.SYS, store),
    ]
    anchors = [(p.at, p.begin, p.end_text) for p in proposals]
    assert anchors == [
        (None, "data[threadIdx.x] = epoch * 100 + threadIdx.x;",
         "data[blockDim.x + threadIdx.x] = epoch;"),
        (None, "__syncthreads();\n  if (threadIdx.x == 0) {", "st_flag_release(flag, epoch);\n  }"),
        (None, "if (threadIdx.x == 0) {\n    while (ld_flag_acquire(flag) < epoch) {",
         "}\n  __syncthreads();"),
        ("while (*flag < epoch) {", None, None),
    ]
    assert proposals[3].notes == ("relaxed (volatile) — no acquire",)


def test_every_anchor_is_found_once_and_on_its_sites_first_or_last_line(tmp_path):
    sources = write_tree(tmp_path)
    for proposal in propose(scan(sources, {})):
        text = (sources / proposal.path).read_text()
        for anchor in (proposal.at, proposal.begin, proposal.end_text):
            if anchor is not None:
                assert text.count(anchor) == 1, (proposal.name, anchor)
        first = proposal.at or proposal.begin
        assert text.count("\n", 0, text.index(first)) + 1 == proposal.start
        if proposal.end_text is not None:
            after = text.index(proposal.end_text) + len(proposal.end_text)
            assert text.count("\n", 0, after) + 1 == proposal.end


def test_a_given_spelling_wins_over_the_wrapper_found(tmp_path):
    sources = write_tree(tmp_path)
    found = scan(sources, {"release.gpu": "st_flag_release"})
    assert "st_flag_release" not in found.helpers
    [release] = [p for p in propose(found) if p.kind is SiteKind.RELEASE]
    assert (release.line, release.scope) == (8, Scope.GPU)
    assert found.spellings["release.gpu"] == ["st_flag_release"]


def test_a_fence_then_a_relaxed_store_is_a_release_of_the_fences_scope(tmp_path):
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "k.cu").write_text(
        "__global__ void publish(int* data, int* flag) {\n"
        "  data[threadIdx.x] = 1;\n"
        "  __syncwarp();\n"
        "  if (threadIdx.x % 32 == 0) {\n"
        "    __threadfence();\n"
        "    atomicExch(flag, 1);\n"
        "  }\n"
        "}\n"
    )
    [store, release] = propose(scan(sources, {}))
    assert (store.name, store.start, store.end, store.at) == (
        "k.publish.store", 2, 2, "data[threadIdx.x] = 1;"
    )
    said = (release.name, release.line, release.start, release.end)
    assert said == ("k.publish.release", 6, 3, 7)
    assert (release.group, release.scope, release.guards) == (Group.WARP, Scope.GPU, store.name)


def test_every_release_and_wait_afdep_declares_holds_a_proposals_line():
    """The real-world check: on afdep's kernels, with its spellings, each
    declared release or wait site contains the line of a proposal of its kind."""
    sources = REPO / "afdep/csrc"
    declared, _ = parse_tree(sources)
    proposals = propose(scan(sources, AFDEP_SPELLINGS))
    missed = [
        site.name
        for site in declared
        if site.kind in ("release", "wait")
        and not any(
            (sources / p.path) == Path(site.path) and site.start < p.line < site.end
            for p in proposals
            if p.kind.value == site.kind
        )
    ]
    assert [s for s in declared if s.kind in ("release", "wait")]  # the check checks something
    assert missed == []



def test_two_identical_branches_are_told_apart_by_the_line_before_each(tmp_path):
    """Each branch's text is in the file twice: `after`, the nearest line
    above it the file holds once, finds each, and the starter's sites resolve
    where they were proposed (load_catalog resolves every anchor)."""
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "k.cu").write_text(
        "__global__ void twice(int* flag, bool early) {\n"
        "  if (early) {\n"
        "    __syncthreads();\n"
        "    __threadfence_system();\n"
        "    atomicExch_system(flag, 1);\n"
        "  } else {\n"
        "    __syncthreads();\n"
        "    __threadfence_system();\n"
        "    atomicExch_system(flag, 1);\n"
        "  }\n"
        "}\n"
    )
    found = scan(sources, {})
    proposals = propose(found)
    said = [(p.name, p.start, p.end, p.group, p.scope, p.after, p.begin) for p in proposals]
    assert said == [
        ("k.twice.release", 3, 5, Group.BLOCK, Scope.SYS, "if (early) {", "__syncthreads();"),
        ("k.twice.release_2", 7, 9, Group.BLOCK, Scope.SYS, "} else {", "__syncthreads();"),
    ]
    tables = tomllib.loads(starter_catalog(found, proposals, "twice", "src"))["target"]["site"]
    for table in tables:
        table["guards"] = "k.twice.data"  # the starter's TODO: no store site before the barrier
    sites = parse_tree(sources, site_tables("twice.toml", tables))[0]
    assert [(s.name, s.lines.start, s.lines.stop - 1) for s in sites] == [
        ("k.twice.release", 3, 5),
        ("k.twice.release_2", 7, 9),
    ]


def test_a_statement_repeated_with_no_line_between_gets_no_anchor_and_the_starter_says_so(
    tmp_path,
):
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "k.cu").write_text(
        "__global__ void twice(int* flag) {\n"
        "  __threadfence_system();\n"
        "  atomicExch_system(flag, 1);\n"
        "  __threadfence_system();\n"
        "  atomicExch_system(flag, 1);\n"
        "}\n"
    )
    found = scan(sources, {})
    proposals = propose(found)
    said = [(p.name, p.start, p.end, p.anchored) for p in proposals]
    assert said == [("k.twice.release", 2, 3, True), ("k.twice.release_2", 4, 5, False)]
    assert proposals[0].after == "__global__ void twice(int* flag) {"
    text = starter_catalog(found, proposals, "twice", "src")
    assert "# its text repeats in the file, another copy before it: no anchor finds it" in text
    assert [site["name"] for site in tomllib.loads(text)["target"]["site"]] == ["k.twice.release"]


def test_a_proposal_over_a_site_the_tree_declares_is_left_out_and_counted(tmp_path):
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "k.cu").write_text(
        "__global__ void publish(int* data, int* flag) {\n"
        "  // @site k.publish.data kind=store\n"
        "  data[threadIdx.x] = 1;\n"
        "  // @end k.publish.data\n"
        "  __syncwarp();\n"
        "  if (threadIdx.x % 32 == 0) {\n"
        "    __threadfence();\n"
        "    atomicExch(flag, 1);\n"
        "  }\n"
        "}\n"
    )
    found = scan(sources, {})
    proposals = propose(found)
    assert [(p.name, p.start, p.end, p.guards) for p in proposals] == [
        ("k.publish.store", 3, 3, None),
        ("k.publish.release", 5, 9, "k.publish.store"),
    ]
    kept, skipped = undeclared(found, proposals)
    assert ([(p.name, p.guards) for p in kept], skipped) == ([("k.publish.release", None)], 1)
    text = starter_catalog(found, kept, "demo", "src", skipped=skipped)
    assert "# 1 proposed sites left out: they overlap sites the sources\n" in text
    assert [s["name"] for s in tomllib.loads(text)["target"]["site"]] == ["k.publish.release"]


def test_the_starter_of_afdeps_own_sources_loads_and_checks_clean(tmp_path):
    """Every proposal over a `// @site` region of afdep's kernels is left out,
    so the starter loads (an anchored site overlapping one is a catalog error)."""
    sources = REPO / "afdep/csrc"
    found = scan(sources, AFDEP_SPELLINGS)
    kept, skipped = undeclared(found, propose(found))
    # Kept: a store before a release no `// @site` holds, and the two relaxed
    # stores of `route_fail` (a lone store is a store site: init's lone_stores).
    assert ([p.name for p in kept], skipped) == (
        ["comm.route_fail.store", "comm.route_fail.store_2",
         "attention_dispatch.attention_dispatch_impl.store_2"],
        15,
    )  # fmt: skip
    path = tmp_path / "afdep.toml"
    path.write_text(starter_catalog(found, kept, "afdep", "afdep/csrc", skipped=skipped))
    catalog = load_catalog(path, tree_root=REPO)
    assert parse_tree(sources, catalog.target.anchors)[1] == []


WAITS = """\
#include "flags.cuh"

__device__ int wait_for(const int* flag, int epoch, const int* abort, long budget) {
  int seen = ld_flag_acquire(flag);
  if (seen >= epoch) return seen;
  long spins = 0;
  while (true) {
    seen = ld_flag_acquire(flag);
    if (seen >= epoch) return seen;
    if (*abort != 0) return -1;
    if (++spins > budget) {
      printf("timeout: flag %p\\n", flag);
      return -2;
    }
  }
}

__device__ int exchange(int* mine, const int* theirs, int epoch, const int* abort) {
  st_flag_release(mine, epoch);
  int seen = 0;
  long spins = 0;
  while (seen < epoch) {
    seen = ld_flag_acquire(theirs);
    if (*abort != 0) {
      printf("abort: flag %p\n", theirs);
      return -1;
    }
    ++spins;
  }
  int folded = static_cast<int>(spins % 7);
  folded += seen - epoch;
  return folded;
}

__device__ int read_once(const int* flag, int epoch) {
  int seen = ld_flag_acquire(flag);
  int a = seen + 1;
  int b = a * 2;
  int c = b - 3;
  int d = c / 5;
  int e = d % 7;
  int f = e + epoch;
  int g = f * f;
  int h = g - a;
  int i = h + b;
  return i + c + d;
}

__global__ void waiter(const int* flag, int epoch, const int* abort) {
  wait_for(flag, epoch, abort, 1000);  // a wrapper is a spelling where it is called
}
"""


def test_a_spin_on_an_acquire_is_a_wait_helper_however_long(tmp_path):
    """A function that spins on an acquire with nothing but loads beside it
    reads as that acquire at any length (afdep's wait_until: a timeout, an
    abort word); one that also releases, or holds its acquire in no loop and
    is no short wrapper, is none."""
    sources = write_tree(tmp_path)
    (sources / "waits.cuh").write_text(WAITS)
    found = scan(sources, {})
    assert (found.helpers["wait_for"].reading.key, found.helpers["wait_for"].line) == (
        "acquire.sys",
        3,
    )
    assert "exchange" not in found.helpers and "read_once" not in found.helpers


def test_afdeps_wait_helper_is_found_with_no_spelling_given_and_the_starter_checks_clean(
    tmp_path,
):
    """With no spelling given, the starter of afdep's own sources spells
    acquire as wait_until (common/comm.cuh), so the contract of every
    release and wait its `// @site` comments declare holds, as with
    catalogs/afdep.toml's spellings."""
    from invariants.sync.contract import check_contracts

    sources = REPO / "afdep/csrc"
    found = scan(sources, {})
    helper = found.helpers["wait_until"]
    assert (helper.reading.key, helper.path, helper.why) == (
        "acquire.sys",
        "common/comm.cuh",
        "ld_acquire_sys, ld_relaxed_sys",
    )
    kept, skipped = undeclared(found, propose(found))
    path = tmp_path / "afdep.toml"
    path.write_text(starter_catalog(found, kept, "afdep", "afdep/csrc", skipped=skipped))
    catalog = load_catalog(path, tree_root=REPO)
    report = check_contracts(REPO, catalog.target, ptx=False)
    assert (report.sites_checked, report.violations) == (13, [])
