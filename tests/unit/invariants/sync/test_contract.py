"""The publish contract (docs/synchronization.md, "The publish contract"): the
kernels of this tree keep it on the source and in the PTX of every variant,
and each realistic ordering bug, made in a copy of the sources, is reported
exactly, at its site, line and variant. The catalog's [target.contract] is
checked key by key; PTX the checker cannot read is a PtxError, never a pass."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog
from invariants.sync.contract import PtxError, check_contracts
from invariants.sync.finding import Finding
from invariants.sync.ptx_check import sources_digest
from invariants.sync.ptx_read import parse_module, read_module
from invariants.sync.spellings import spelling
from tests.unit.faults.catalog.test_load import FAULT, load
from tools.faults_cli.main import main

REPO = Path(__file__).parents[4]
CSRC = REPO / "afdep/csrc"
CATALOG = REPO / "catalogs/afdep.toml"
CATALOG_TARGET = load_catalog(CATALOG, tree_root=REPO).target
# Mutants are compiled for one hidden size, payload and view (10 variants, every
# site present): the catalog's own command, narrowed, keeps the suite quick.
NARROW = ("--hidden", "2048", "--payload", "bf16", "--view", "expanded")
NARROW_TARGET = dataclasses.replace(
    CATALOG_TARGET,
    contract=dataclasses.replace(CATALOG_TARGET.contract, ptx=CATALOG_TARGET.contract.ptx + NARROW),
)
SOURCE_BF16 = (
    "attention_dispatch<kHidden=2048, kTopK=8, kFp8=false, kCountFirst=true, kArmAttention={},"
    " kNumThreads=512>"
)
EPILOGUE_BF16 = (
    "ffn_stream_expand<kHidden=2048, kTopK=8, kFp8=false, kCollectView=false, kArmAttention={},"
    " kNumThreads=512>"
)
COMBINE_BF16 = "ffn_combine<kHidden=2048, kTopK=8, kNumThreads=512>"
SOURCE_COMBINE_BF16 = "attention_combine<kHidden=2048, kNumThreads=512>"


def _nvrtc_missing() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return True
    return False


needs_nvrtc = pytest.mark.skipif(
    _nvrtc_missing(), reason="cuda.bindings.nvrtc is not installed: no PTX can be made"
)


@pytest.fixture(scope="module")
def ptx_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("contract") / "ptx"


def mutated(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """A copy of the kernel sources with `old` (found once) replaced by `new`."""
    csrc = tmp_path / "csrc"
    shutil.copytree(CSRC, csrc)
    path = csrc / file
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    return csrc


def line_of(path: Path, text: str, after: str = "") -> int:
    """The 1-based line holding `text`, the first after the line holding `after`."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line) if after else 0
    return next(i for i, line in enumerate(lines) if i >= start and text in line) + 1


def check(csrc: Path, cache: Path, *, ptx: bool = True) -> list[str]:
    report = check_contracts(REPO, NARROW_TARGET, ptx=ptx, sources=csrc, cache=cache)
    if ptx:
        assert report.variants_checked == 10
    return [str(v) for v in report.violations]


# ---------------------------------------------------------------- this tree
def test_this_tree_keeps_every_contract_on_the_source():
    report = check_contracts(REPO, CATALOG_TARGET, ptx=False)
    assert (report.ok, report.sites_checked, report.variants_checked) == (True, 13, 0)


@needs_nvrtc
def test_this_tree_keeps_every_contract_in_every_variant(ptx_cache, capsys):
    report = check_contracts(REPO, CATALOG_TARGET, cache=ptx_cache)
    assert report.violations == []
    assert (report.sites_checked, report.variants_checked, report.ptx_cached) == (13, 42, False)
    # the CLI finds the PTX cached under --workdir and says so
    assert main(["--workdir", str(ptx_cache.parent), "sites", "--check", str(CSRC)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"contract of 13 releases and waits \(42 variants, PTX cached \d+\.\d s\): ok", out[0]
    )
    assert out[1] == f"23 sites in {CSRC}: ok"


def test_a_violation_reads_path_line_site_variant_and_what_is_missing():
    found = Finding("k.cuh", 7, "no bar.sync", "a.b", "k<1>")
    assert str(found) == "k.cuh:7: a.b [k<1>]: no bar.sync"
    assert str(dataclasses.replace(found, variant=None)) == "k.cuh:7: a.b: no bar.sync"


# ------------------------------------------------------------- the mutants
ROW_RELEASE = "// @site cf.attention_dispatch.row_release"
ROW_FLAG = "ptx::st_release_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags)"
DONE_RELEASE = "// @site cf.attention_dispatch.done_release"
DONE_RED = "ptx::red_add_release_sys(peer_ptr<u64>(p, num_attention + ffn, p.off_done)"
COMBINE_FLAG = "ptx::st_release_sys(flags + static_cast<u64>(ffn_local)"
ROW_WAIT = 'if (lane_idx == 0) wait_until(flags + slot, epoch, "cf.ffn_stream_expand.row_wait", p);'
RELAXED_SPIN = "while (static_cast<i64>(ptx::ld_relaxed_sys(flags + slot) - epoch) < 0) {}"


@needs_nvrtc
def test_no_syncwarp_before_a_lane_publishes(tmp_path, ptx_cache):
    csrc = mutated(
        tmp_path,
        "impls/attention_dispatch.cuh",
        "      __syncwarp();\n      if (lane_idx < num_pending)\n        ptx::st_release_sys(",
        "      if (lane_idx < num_pending)\n        ptx::st_release_sys(",
    )
    path = csrc / "impls/attention_dispatch.cuh"
    where = f"{path}:{line_of(path, ROW_FLAG)}: cf.attention_dispatch.row_release"
    missing = "no bar.warp.sync between the warp's stores and st.release.sys on every path"
    assert check(csrc, ptx_cache) == [
        f"{where}: no __syncwarp before the publish st_release_sys",
        f"{where} [{SOURCE_BF16.format('false')}]: {missing}",
        f"{where} [{SOURCE_BF16.format('true')}]: {missing}",
    ]


@needs_nvrtc
def test_no_syncthreads_before_one_thread_publishes_the_block(tmp_path, ptx_cache):
    header = (
        "    // @site cf.attention_dispatch.done_release kind=release producers=block scope=sys"
        " guards=cf.attention_dispatch.row_store\n"
    )
    csrc = mutated(
        tmp_path, "impls/attention_dispatch.cuh", header + "    __syncthreads();\n", header
    )
    path = csrc / "impls/attention_dispatch.cuh"
    where = (
        f"{path}:{line_of(path, DONE_RED, after=DONE_RELEASE)}: cf.attention_dispatch.done_release"
    )
    missing = "no bar.sync between the block's stores and red.release.sys on every path"
    assert check(csrc, ptx_cache) == [
        f"{where}: no __syncthreads before the publish red_add_release_sys",
        f"{where} [{SOURCE_BF16.format('false')}]: {missing}",
        f"{where} [{SOURCE_BF16.format('true')}]: {missing}",
    ]


@needs_nvrtc
def test_a_release_weakened_to_relaxed(tmp_path, ptx_cache):
    relaxed = COMBINE_FLAG.replace("st_release_sys", "st_relaxed_sys")
    csrc = mutated(tmp_path, "impls/ffn_combine.cuh", COMBINE_FLAG, relaxed)
    path = csrc / "impls/ffn_combine.cuh"
    where = f"{path}:{line_of(path, relaxed)}: cb.ffn_combine.row_release"
    assert check(csrc, ptx_cache) == [
        f"{where}: publish st_relaxed_sys is no release at scope sys"
        " and no fence_acq_rel_sys precedes it",
        f"{where} [{COMBINE_BF16}]: publish is st.relaxed.sys: no release at scope sys",
    ]


@needs_nvrtc
def test_the_fence_removed_where_the_release_is_relaxed(tmp_path, ptx_cache):
    fenced = "ptx::fence_acq_rel_sys();\n      " + COMBINE_FLAG.replace("release", "relaxed")
    csrc = mutated(tmp_path / "fenced", "impls/ffn_combine.cuh", COMBINE_FLAG, fenced)
    assert check(csrc, ptx_cache) == []  # a fence after the barrier, then a relaxed store
    unfenced = mutated(tmp_path / "unfenced", "impls/ffn_combine.cuh", COMBINE_FLAG, fenced)
    path = unfenced / "impls/ffn_combine.cuh"
    path.write_text(path.read_text().replace("ptx::fence_acq_rel_sys();\n      ", ""))
    where = f"{path}:{line_of(path, 'st_relaxed_sys(flags')}: cb.ffn_combine.row_release"
    assert check(unfenced, ptx_cache)[1:] == [
        f"{where} [{COMBINE_BF16}]: publish is st.relaxed.sys: no release at scope sys"
    ]


@needs_nvrtc
def test_a_wait_weakened_to_a_relaxed_load(tmp_path, ptx_cache):
    spin = f"if (lane_idx == 0) {RELAXED_SPIN}"
    csrc = mutated(tmp_path, "impls/ffn_stream_expand.cuh", ROW_WAIT, spin)
    path = csrc / "impls/ffn_stream_expand.cuh"
    line = line_of(path, "// @site cf.ffn_stream_expand.row_wait")
    where = f"{path}:{line}: cf.ffn_stream_expand.row_wait"
    missing = (
        "no ld.acquire.sys in the wait (nor a call that acquires, nor a relaxed load then"
        " fence.acq_rel.sys)"
    )
    assert check(csrc, ptx_cache) == [
        f"{where}: no acquire at scope sys: no ld_acquire_sys|wait_until, nor a load then"
        " fence_acq_rel_sys",
        f"{where} [{EPILOGUE_BF16.format('false')}]: {missing}",
        f"{where} [{EPILOGUE_BF16.format('true')}]: {missing}",
    ]
    # the same relaxed spin with a fence after it acquires
    fenced = f"if (lane_idx == 0) {{ {RELAXED_SPIN} ptx::fence_acq_rel_sys(); }}"
    assert (
        check(
            mutated(tmp_path / "fenced", "impls/ffn_stream_expand.cuh", ROW_WAIT, fenced),
            ptx_cache,
        )
        == []
    )


@needs_nvrtc
def test_no_syncwarp_after_lane_zero_waits(tmp_path, ptx_cache):
    csrc = mutated(
        tmp_path,
        "impls/attention_combine.cuh",
        '"cb.attention_combine.row_wait", p);\n    __syncwarp();\n',
        '"cb.attention_combine.row_wait", p);\n',
    )
    path = csrc / "impls/attention_combine.cuh"
    where = f"{path}:{line_of(path, 'wait_until(flags')}: cb.attention_combine.row_wait"
    assert check(csrc, ptx_cache) == [
        f"{where}: no __syncwarp after the acquire wait_until",
        f"{where} [{SOURCE_COMBINE_BF16}]: no bar.warp.sync after the acquire on every path"
        " before the warp reads",
    ]


@needs_nvrtc
def test_a_site_no_variant_compiles_is_reported(tmp_path, ptx_cache):
    dead = (
        "    // @site cb.ffn_combine.dead_release kind=release producers=thread scope=sys"
        " guards=cb.ffn_combine.row_store\n"
        "    if constexpr (kHidden < 0) ptx::st_release_sys(nullptr, epoch);\n"
        "    // @end cb.ffn_combine.dead_release\n"
    )
    end = "    // @end cb.ffn_combine.row_release\n"
    csrc = mutated(tmp_path, "impls/ffn_combine.cuh", end, end + dead)
    path = csrc / "impls/ffn_combine.cuh"
    where = (
        f"{path}:{line_of(path, '@site cb.ffn_combine.dead_release')}: cb.ffn_combine.dead_release"
    )
    assert check(csrc, ptx_cache) == [f"{where}: no instruction of the site in any variant"]


def region(text: str, site: str) -> str:
    """A site's region, from its `// @site` line to its `// @end` line."""
    start = text.index(f"    // @site {site} ")
    end = text.index(f"    // @end {site}\n") + len(f"    // @end {site}\n")
    return text[start:end]


def test_the_publish_moved_above_the_stores(tmp_path):
    csrc = tmp_path / "csrc"
    shutil.copytree(CSRC, csrc)
    path = csrc / "impls/ffn_combine.cuh"
    text = path.read_text()
    store, release = (
        region(text, "cb.ffn_combine.row_store"),
        region(text, "cb.ffn_combine.row_release"),
    )
    assert store + "\n" + release in text
    path.write_text(text.replace(store + "\n" + release, release + "\n" + store))
    start, end = (
        line_of(path, "@site cb.ffn_combine.row_store"),
        line_of(path, "@end cb.ffn_combine.row_store"),
    )
    where = (
        f"{path}:{line_of(path, '@site cb.ffn_combine.row_release')}: cb.ffn_combine.row_release"
    )
    assert check(csrc, tmp_path / "unused", ptx=False) == [
        f"{where}: the guarded site cb.ffn_combine.row_store (lines {start}-{end}) does not end "
        "before it starts"
    ]


# ------------------------------------------------- malformed contracts (CLI)
@pytest.mark.parametrize(
    "old, new, message, checked",
    [
        (
            "kind=release producers=warp scope=sys guards=cb.ffn_combine.row_store",
            "kind=release scope=sys guards=cb.ffn_combine.row_store",
            "site cb.ffn_combine.row_release: a release must declare producers=, scope=, guards=;"
            " missing producers",
            12,
        ),
        (
            "kind=release producers=warp scope=sys guards=cb.ffn_combine.row_store",
            "kind=release producers=warp scope=system guards=cb.ffn_combine.row_store",
            "site cb.ffn_combine.row_release: scope=system is not one of sys, gpu, cta",
            12,
        ),
        (
            "// @site cb.ffn_combine.row_store kind=store",
            "// @site cb.ffn_combine.row_store kind=store scope=sys",
            "site cb.ffn_combine.row_store: scope= belongs to a release or a wait, not a store",
            13,
        ),
    ],
)
def test_a_malformed_contract_names_site_and_line(tmp_path, capsys, old, new, message, checked):
    csrc = mutated(tmp_path, "impls/ffn_combine.cuh", old, new)
    path = csrc / "impls/ffn_combine.cuh"
    assert main(["--catalog", str(CATALOG), "sites", "--check", "--no-ptx", str(csrc)]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"{path}:{line_of(path, new)}: {message}"]
    assert captured.out.splitlines() == [
        f"contract of {checked} releases and waits (source only): ok",
        f"23 sites in {csrc}: 1 violation(s)",
    ]


# ---------------------------------------------------------- unreadable PTX
ENTRY = ".visible .entry k()\n{\n"
PTX_CASES = [
    (".version 9.5\n", "k.ptx: no .entry function: not a kernel's PTX"),
    (ENTRY + "ret;\n}\n", "k.ptx: no .loc line: compile with line info (-lineinfo)"),
    (ENTRY + ".loc 1 2 3\nret;\n}\n", "k.ptx:4: .loc names file 1, no .file"),
    (
        '.file 1 "k.cuh"\n' + ENTRY + ".loc 1 2 3\nbra $L_nowhere;\n}\n",
        "k.ptx:5: branch to unknown label $L_nowhere",
    ),
    (
        ENTRY + ".loc 1 2 3\nbrx.idx %r1, $L_table;\n}\n",
        "k.ptx:4: indirect branch brx.idx: the checker cannot follow it",
    ),
    (ENTRY + ".loc 1 2 3\nret;\n", "k.ptx: function k never closes"),
    (".visible .entry k()\n", "k.ptx:1: a function header the checker cannot read"),
]


@pytest.mark.parametrize("text, message", PTX_CASES)
def test_ptx_the_checker_cannot_read_is_a_named_error(text, message):
    with pytest.raises(PtxError) as error:
        parse_module(text, "k.ptx")
    assert str(error.value) == message


def test_a_module_is_parsed_once_per_text_and_an_unreadable_one_every_time(tmp_path):
    """A fault leaves most variants' PTX the clean tree's, byte for byte: a
    sweep reads them from each tree's folder and parses them once."""
    text = '.file 1 "k.cuh"\n' + ENTRY + ".loc 1 2 3\nret;\n}\n"
    for folder in ("clean", "fault", "other"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "k.ptx").write_text(text if folder != "other" else text + "\n")
    clean, fault = read_module(tmp_path / "clean/k.ptx"), read_module(tmp_path / "fault/k.ptx")
    assert fault is clean
    assert read_module(tmp_path / "other/k.ptx") is not clean
    (tmp_path / "bad.ptx").write_text(ENTRY + "ret;\n}\n")
    for _ in range(2):  # a failure is never kept: each reader is told
        with pytest.raises(PtxError, match="no .loc line"):
            read_module(tmp_path / "bad.ptx")


def test_the_ptx_cache_key_holds_the_commands_other_inputs(tmp_path):
    """A harness the ptx command compiles with the sources (a foreign
    target's) is in the key: an edit of it, or its absence, makes new PTX."""
    sources, harness = tmp_path / "src", tmp_path / "harness"
    for folder, name in ((sources, "k.cuh"), (harness, "h.cu")):
        folder.mkdir()
        (folder / name).write_text("int x;\n")
    words = ("nvcc", "{tree}/harness/h.cu")
    alone, with_harness = sources_digest(sources, words), sources_digest(sources, words, (harness,))
    assert alone != with_harness
    (harness / "h.cu").write_text("int y;\n")
    assert sources_digest(sources, words, (harness,)) not in (alone, with_harness)
    assert sources_digest(sources, words, (harness / "h.cu",)) != alone  # a file too
    missing = sources_digest(sources, words, (tmp_path / "none",))
    assert missing not in (alone, with_harness)


def test_cached_ptx_without_line_info_fails_the_check(tmp_path):
    cache = tmp_path / "ptx"
    folder = cache / sources_digest(CSRC, NARROW_TARGET.contract.ptx)
    folder.mkdir(parents=True)
    (folder / "k.ptx").write_text(ENTRY + "ret;\n}\n")
    (folder / "index.json").write_text(json.dumps({"k.ptx": "k<1>"}))
    with pytest.raises(PtxError, match=re.escape("k.ptx: no .loc line: compile with line info")):
        check_contracts(REPO, NARROW_TARGET, sources=CSRC, cache=cache)


@needs_nvrtc
def test_sources_that_do_not_compile_fail_the_check(tmp_path, capsys):
    csrc = mutated(tmp_path, "impls/ffn_combine.cuh", "__syncwarp();\n\n", "__syncwarp()\n\n")
    with pytest.raises(PtxError) as error:
        check_contracts(REPO, NARROW_TARGET, sources=csrc, cache=tmp_path / "ptx")
    assert re.fullmatch(r"the ptx command failed \(exit 1\): .+ \(log: .+\.log\)", str(error.value))
    assert (
        main(["--catalog", str(CATALOG), "--workdir", str(tmp_path), "sites", "--check", str(csrc)])
        == 2
    )
    assert (
        "error: sites: the contract's PTX: the ptx command failed (exit 1)"
        in capsys.readouterr().err
    )


# ------------------------------------------------------ [target.contract]
CONTRACT = """\
[target.contract]
ptx = ["{python}", "-m", "tool", "--out", "{out}", "--sources", "{sources}"]
barrier.warp = "__syncwarp"
release.sys = "st_release_sys|red_add_release_sys"
"""


def test_the_catalog_spells_the_contract(tmp_path):
    _, loader = load(tmp_path, CONTRACT + FAULT)
    contract = loader().target.contract
    assert contract.ptx == ("{python}", "-m", "tool", "--out", "{out}", "--sources", "{sources}")
    assert [spelling(contract.barrier["warp"]), spelling(contract.release["sys"])] == [
        "__syncwarp",
        "st_release_sys|red_add_release_sys",
    ]
    assert contract.barrier["warp"].search("  __syncwarp ();")
    assert not contract.barrier["warp"].search("my__syncwarp();")
    assert CATALOG_TARGET.contract.store.search("ptx::st_relaxed_sys(p, 1);")


@pytest.mark.parametrize(
    "entry, message",
    [
        ('barrier.wrap = "__syncwarp"', "barrier.wrap: not one of warp, block, grid"),
        ('barrier.thread = "x"', "barrier.thread: not one of warp, block, grid"),
        ('release.system = "x"', "release.system: not one of sys, gpu, cta"),
        ('acquire.sys = "wait_until("', "acquire.sys: 'wait_until(' is not a regular expression"),
        ('fence.sys = ""', "fence.sys: a regular expression, got ''"),
        ('store = "x|"', "store: 'x|' matches an empty name"),
        ("barrier = 1", "barrier: a table keyed by warp, block, grid"),
        ('colour = "red"', "unknown keys ['colour']"),
        (
            'ptx = ["{python}", "{csrc}"]',
            "ptx: unknown placeholder {csrc} in '{csrc}'; known:"
            " {tree}, {sources}, {out}, {python}",
        ),
    ],
)
def test_a_bad_contract_entry_is_a_catalog_error_naming_its_key(tmp_path, entry, message):
    path, loader = load(tmp_path, "[target.contract]\n" + entry + "\n" + FAULT)
    with pytest.raises(CatalogError) as error:
        loader()
    assert str(error.value).startswith(f"{path}: target.contract: {message}")


def test_a_target_without_a_contract_has_nothing_to_check(tmp_path):
    _, loader = load(tmp_path, FAULT)
    report = check_contracts(REPO, loader().target, sources=CSRC)
    assert (report.ok, report.sites_checked, report.variants_checked) == (True, 0, 0)


def test_a_kernels_ptx_depends_on_the_headers_it_includes_only(tmp_path):
    from afdep.jit import KernelSpec, include_digest

    csrc = tmp_path / "csrc"
    shutil.copytree(CSRC, csrc)
    combine = KernelSpec.make("attention_combine", kHidden=2048, kNumThreads=512)
    before = include_digest(combine, csrc)
    (csrc / "impls/attention_dispatch.cuh").write_text("// another kernel changed\n")
    assert include_digest(combine, csrc) == before
    with (csrc / "common/comm.cuh").open("a") as comm:
        comm.write("// a header it includes changed\n")
    assert include_digest(combine, csrc) != before


@needs_nvrtc
@pytest.mark.parametrize(
    "old, new, kind, missing",
    [
        (
            "ld.acquire.sys.global.u64 %0, [%1];",
            "ld.relaxed.sys.global.u64 %0, [%1];",
            "wait",
            "no ld.acquire.sys in the wait (nor a call that acquires, nor a relaxed load then"
            " fence.acq_rel.sys)",
        ),
        (
            "st.release.sys.global.u64 [%0], %1;",
            "st.release.gpu.global.u64 [%0], %1;",
            "release",
            "publish is st.release.gpu: no release at scope sys",
        ),
    ],
)
def test_a_primitive_weakened_under_its_name_is_caught_in_the_ptx(
    tmp_path, ptx_cache, old, new, kind, missing
):
    """The source still calls ld_acquire_sys / st_release_sys: only the PTX
    shows that wait_until no longer acquires, or that the release is narrowed."""
    csrc = mutated(tmp_path, "common/ptx.cuh", old, new)
    report = check_contracts(REPO, NARROW_TARGET, sources=csrc, cache=ptx_cache)
    assert {v.message for v in report.violations} == {missing}
    assert all(v.variant is not None for v in report.violations)
    named = {v.site for v in report.violations}
    if kind == "wait":  # every wait calls wait_until
        assert named == {
            "cf.attention_dispatch.prefix_wait",
            "cf.ffn_place.count_wait",
            "cf.ffn_stream_expand.prefix_wait",
            "cf.ffn_stream_expand.gate_wait",
            "cf.ffn_stream_expand.row_wait",
            "pf.ffn_expand.done_wait",
            "cb.attention_combine.row_wait",
        }
    else:  # the releases that store their flag (done is a red.release)
        assert named == {
            "cf.attention_dispatch.count_release",
            "cf.attention_dispatch.row_release",
            "cf.ffn_place.prefix_release",
            "cb.ffn_combine.row_release",
        }


def test_the_ptx_tool_names_a_folder_without_kernels(tmp_path, capsys):
    from tools.build import main as build

    assert build(["--csrc", str(tmp_path), "--ptx", str(tmp_path / "out")]) == 2
    assert (
        capsys.readouterr().err == f"error: --csrc {tmp_path}: no impls/ folder of kernel sources\n"
    )


def test_sources_no_catalog_names_get_the_site_rules_only(tmp_path, capsys):
    csrc = mutated(tmp_path, "impls/ffn_combine.cuh", COMBINE_FLAG, "ptx::st_relaxed_sys(flags")
    assert main(["sites", "--check", str(csrc)]) == 0  # no catalog's sources: no contract
    assert capsys.readouterr().out.splitlines() == [f"23 sites in {csrc}: ok"]
    fixture = REPO / "tests/fixtures/flag_payload"  # its catalog has no [target.contract]
    assert main(["sites", "--check", str(fixture)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"4 sites in {fixture}: ok"]


def test_a_ptx_build_that_fails_is_said_by_the_compilers_first_error(tmp_path):
    """Not the log's last line (a kernel that compiled fine): the file from
    the tree's root, its line, the compiler's message (NVRTC's and gcc's forms)."""
    from invariants.sync.ptx_compile import compiler_error

    log = [
        "ptx        0.00s   43167 B  ffn_stream_expand<kHidden=7168>",
        f"{tmp_path}/afdep/csrc/impls/ffn_expand.cuh(30): error: expected an expression",
        '1 error detected in the compilation of "ffn_expand.cu".',
        "ptx        0.00s   51234 B  attention_combine<kHidden=2048>",
    ]
    assert compiler_error(log, tmp_path) == (
        "afdep/csrc/impls/ffn_expand.cuh:30: expected an expression"
    )
    gcc = ["/elsewhere/k.cu:12:5: error: 'x' was not declared in this scope"]
    assert compiler_error(gcc, tmp_path) == "/elsewhere/k.cu:12: 'x' was not declared in this scope"
    assert compiler_error(["all fine", "ptx 0.1s"], tmp_path) is None


def test_an_interrupted_ptx_compile_leaves_no_half_written_folder(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import invariants.sync.ptx_check as ptx_check
    import invariants.sync.ptx_compile as ptx_compile
    from invariants.sync.spellings import ContractSpellings

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ptx_compile, "run_logged", interrupted)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text("__global__ void k() {}\n")
    target = SimpleNamespace(
        name="t", sources="src", anchors=(), env={}, timeout_s=5.0,
        contract=ContractSpellings(ptx=("{python}", "-c", "pass", "{out}")),
    )  # fmt: skip
    cache = tmp_path / "cache"
    killed = cache / ".0123.abcd"  # an earlier compile's, killed outright long ago
    killed.mkdir(parents=True)
    (killed / "k.ptx").write_text("half")
    os.utime(killed, (0, 0))
    with pytest.raises(KeyboardInterrupt):
        ptx_check.ptx_folder(tmp_path, tmp_path / "src", target, cache)
    assert list(cache.iterdir()) == []  # no folder, no temporary one, no log


def test_two_checks_of_one_tree_at_once_each_get_its_ptx(tmp_path):
    """Two reviews of one BASE compile the same PTX at once: neither removes
    the other's log nor folder, both read the one that lands."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    import invariants.sync.ptx_check as ptx_check
    from invariants.sync.spellings import ContractSpellings

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "k.cu").write_text("__global__ void k() {}\n")
    write = (
        "import json, pathlib, sys, time; out = pathlib.Path(sys.argv[1]); print('compiling');"
        " time.sleep(0.5); (out / 'k.ptx').write_text('ptx');"
        " (out / 'index.json').write_text(json.dumps(dict([('k.ptx', 'k')])))"
    )
    target = SimpleNamespace(
        name="t", sources="src", anchors=(), env={}, timeout_s=30.0,
        contract=ContractSpellings(ptx=("{python}", "-c", write, "{out}")),
    )  # fmt: skip
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(2) as pool:
        jobs = [
            pool.submit(ptx_check.ptx_folder, tmp_path, tmp_path / "src", target, cache)
            for _ in range(2)
        ]
        (one, cached_one), (other, cached_other) = [job.result() for job in jobs]
    assert one == other and (cached_one, cached_other) == (False, False)
    assert (one / "k.ptx").read_text() == "ptx"
    assert [p.name for p in cache.iterdir()] == [one.name]  # no log, no temporary folder left
