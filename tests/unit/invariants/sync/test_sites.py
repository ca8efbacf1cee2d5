"""invariants.sync.sites: the site parser and `python -m faults sites --check`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from invariants.sync.sites import Group, Scope, parse_tree, site_body
from tools.faults_cli.main import main

CSRC = Path(__file__).parents[4] / "afdep" / "csrc"

GOOD = """\
    // @site fx.source.row_store kind=store
    row[0] = 1;
    // @end fx.source.row_store
    // @site fx.source.flag_release kind=release producers=warp scope=sys guards=fx.source.row_store
    __syncwarp();
    if (lane == 0) ptx::st_release_sys(flag, epoch);
    // @end fx.source.flag_release
    // @site fx.sink.flag_wait kind=wait consumers=thread scope=gpu guards=fx.source.row_store
    wait_until(flag, epoch, "fx.sink.flag_wait", p);  // spins
    // @end fx.sink.flag_wait
"""


def write(tmp_path: Path, text: str, name: str = "impls/kernel.cuh") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def messages(tmp_path: Path) -> list[str]:
    return [str(v) for v in parse_tree(tmp_path)[1]]


def test_real_sources_pass_and_name_every_protocol_site():
    sites, violations = parse_tree(CSRC)
    assert violations == []
    names = {s.name: s for s in sites}
    assert names["pf.ffn_expand.done_wait"].guards == "pf.attention_dispatch.row_store"
    assert names["cb.attention_combine.row_wait"].kind == "wait"
    assert {
        "pf.attention_dispatch.row_store",
        "pf.attention_dispatch.done_release",
        "cb.ffn_combine.row_store",
        "cb.ffn_combine.row_release",
        "cb.attention_combine.reduce",
        "pf.ffn_expand.copy",
    } <= set(names)


def test_good_fixture_parses(tmp_path):
    write(tmp_path, GOOD)
    sites, violations = parse_tree(tmp_path)
    assert violations == []
    assert [(s.name, s.kind, s.guards, s.start, s.end) for s in sites] == [
        ("fx.source.row_store", "store", None, 1, 3),
        ("fx.source.flag_release", "release", "fx.source.row_store", 4, 7),
        ("fx.sink.flag_wait", "wait", "fx.source.row_store", 8, 10),
    ]
    assert [(s.producers, s.consumers, s.scope) for s in sites] == [
        (None, None, None),
        (Group.WARP, None, Scope.SYS),
        (None, Group.THREAD, Scope.GPU),
    ]
    assert site_body(sites[0]) == ["row[0] = 1;"]


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "ptx::st_release_sys(flag, 1);\n",
            "kernel.cuh:1: ordering primitive st_release_sys( outside any site",
        ),
        (
            'x = 1;\nwait_until(flag, 1, "s", p);\n',
            "kernel.cuh:2: ordering primitive wait_until( outside any site",
        ),
        (  # the weaker twins a mutant's tree defines (a rule's twin=) are waits too
            'wait_until_relaxed(flag, 1, "s", p);\n',
            "kernel.cuh:1: ordering primitive wait_until_relaxed( outside any site",
        ),
        ("atomicAdd(&count, 1);\n", "kernel.cuh:1: ordering primitive atomicAdd( outside"),
        (
            "// @site a.b kind=store\n// @site a.c kind=store\n// @end a.c\n// @end a.b\n",
            "kernel.cuh:2: site a.c opens inside site a.b (opened at line 1)",
        ),
        ("// @site a.b kind=store\nx = 1;\n", "kernel.cuh:1: site a.b is never closed"),
        ("// @end a.b\n", "kernel.cuh:1: @end a.b without an open site"),
        (
            "// @site a.b kind=store\n// @end a.c\n",
            "kernel.cuh:2: @end a.c closes site a.b (opened at line 1)",
        ),
        (
            "// @site a.b kind=load\n// @end a.b\n",
            "kernel.cuh:1: site a.b: kind=load is not one of store, release, wait, compute",
        ),
        (
            "// @site a.b kind=wait\n// @end a.b\n",
            "kernel.cuh:1: site a.b: a wait must declare consumers=, scope=, guards=;"
            " missing consumers, scope, guards",
        ),
        (
            "// @site a.b kind=wait consumers=warp scope=sys guards=a.zz\n// @end a.b\n",
            "kernel.cuh:1: site a.b guards unknown site a.zz",
        ),
        (
            "// @site a.b kind=store guards=a.b\n// @end a.b\n",
            "kernel.cuh:1: site a.b: guards= belongs to a release or a wait, not a store",
        ),
        (
            "// @site a.b kind=store color=red\n// @end a.b\n",
            "kernel.cuh:1: site a.b: unknown attributes ['color']",
        ),
        (
            "// @site RowStore kind=store\n// @end RowStore\n",
            "kernel.cuh:1: site name 'RowStore' is not dotted lower_case",
        ),
    ],
)
def test_each_broken_fixture_names_file_and_line(tmp_path, text, expected):
    path = write(tmp_path, text)
    found = messages(tmp_path)
    assert any(m.startswith(str(path.parent)) and expected in m for m in found), found


def test_duplicate_names_across_files(tmp_path):
    write(tmp_path, "// @site a.b kind=store\n// @end a.b\n", "impls/one.cuh")
    second = write(tmp_path, "\n// @site a.b kind=store\n// @end a.b\n", "impls/two.cuh")
    assert messages(tmp_path) == [
        f"{second}:2: site a.b defined again (first at {tmp_path / 'impls/one.cuh'}:1)"
    ]


def test_definitions_under_common_are_exempt_and_comments_ignored(tmp_path):
    write(tmp_path, "inline void f() { ptx::fence_acq_rel_sys(); }\n", "common/ptx.cuh")
    write(tmp_path, "// a comment naming st_release_sys(x) is fine\n")
    assert messages(tmp_path) == []


def test_cli_check(tmp_path, capsys):
    assert main(["sites", "--check", "--no-ptx", str(CSRC)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "contract of 13 releases and waits (source only): ok",
        f"23 sites in {CSRC}: ok",
    ]
    broken = write(tmp_path, "ptx::red_add_release_sys(p, 1);\n")
    assert main(["sites", "--check", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert f"{broken}:1: ordering primitive red_add_release_sys(" in captured.err
    assert main(["sites", str(tmp_path / "missing")]) == 2


STORE = "// @site a.data kind=store\n// @end a.data\n"


@pytest.mark.parametrize(
    "header, expected",
    [
        (
            "// @site a.pub kind=release scope=sys guards=a.data",
            "kernel.cuh:3: site a.pub: a release must declare producers=, scope=, guards=;"
            " missing producers",
        ),
        (
            "// @site a.pub kind=release producers=warp guards=a.data",
            "kernel.cuh:3: site a.pub: a release must declare producers=, scope=, guards=;"
            " missing scope",
        ),
        (
            "// @site a.pub kind=release producers=warp scope=sys",
            "kernel.cuh:3: site a.pub: a release must declare producers=, scope=, guards=;"
            " missing guards",
        ),
        (
            "// @site a.pub kind=release producers=wave scope=sys guards=a.data",
            "kernel.cuh:3: site a.pub: producers=wave is not one of thread, warp, block, grid",
        ),
        (
            "// @site a.pub kind=release producers=warp scope=system guards=a.data",
            "kernel.cuh:3: site a.pub: scope=system is not one of sys, gpu, cta",
        ),
        (
            "// @site a.pub kind=release producers=warp consumers=warp scope=sys guards=a.data",
            "kernel.cuh:3: site a.pub: consumers= belongs to a wait, not a release",
        ),
        (
            "// @site a.pub kind=wait consumers=grid scope=sys guards=a.data",
            "kernel.cuh:3: site a.pub: consumers=grid is not one of thread, warp, block",
        ),
        (
            "// @site a.pub kind=wait producers=warp consumers=warp scope=sys guards=a.data",
            "kernel.cuh:3: site a.pub: producers= belongs to a release, not a wait",
        ),
        (
            "// @site a.pub kind=compute scope=sys",
            "kernel.cuh:3: site a.pub: scope= belongs to a release or a wait, not a compute",
        ),
        (
            "// @site a.pub kind=wait consumers=warp scope=sys guards=a.pub",
            "kernel.cuh:3: site a.pub guards a.pub, a wait site: a site guards a store or"
            " compute site",
        ),
    ],
)
def test_malformed_contract_names_site_and_line(tmp_path, header, expected):
    path = write(tmp_path, f"{STORE}{header}\n// @end a.pub\n")
    assert messages(tmp_path) == [f"{path.parent}/{expected}"]


def test_a_malformed_contract_value_is_left_out_of_the_site(tmp_path):
    write(
        tmp_path,
        f"{STORE}// @site a.pub kind=release producers=wave scope=sys guards=a.data\n"
        "// @end a.pub\n",
    )
    site = parse_tree(tmp_path)[0][1]
    assert (site.producers, site.scope, site.guards) == (None, Scope.SYS, "a.data")


def test_real_sources_declare_every_contract():
    contracts = {
        s.name: (s.producers or s.consumers, s.scope, s.guards)
        for s in parse_tree(CSRC)[0]
        if s.kind in ("release", "wait")
    }
    block, warp, sys = Group.BLOCK, Group.WARP, Scope.SYS
    assert contracts == {
        "cf.attention_dispatch.count_release": (block, sys, "cf.attention_dispatch.count_put"),
        "cf.attention_dispatch.row_release": (warp, sys, "cf.attention_dispatch.row_store"),
        "cf.attention_dispatch.done_release": (block, sys, "cf.attention_dispatch.row_store"),
        "pf.attention_dispatch.done_release": (block, sys, "pf.attention_dispatch.row_store"),
        "cf.ffn_place.prefix_release": (block, sys, "cf.ffn_place.prefix_compute"),
        "cb.ffn_combine.row_release": (warp, sys, "cb.ffn_combine.row_store"),
        "cf.attention_dispatch.prefix_wait": (block, sys, "cf.ffn_place.prefix_compute"),
        "cf.ffn_place.count_wait": (block, sys, "cf.attention_dispatch.count_put"),
        "cf.ffn_stream_expand.prefix_wait": (block, sys, "cf.ffn_place.prefix_compute"),
        "cf.ffn_stream_expand.gate_wait": (block, sys, "cf.attention_dispatch.row_store"),
        "cf.ffn_stream_expand.row_wait": (warp, sys, "cf.attention_dispatch.row_store"),
        "pf.ffn_expand.done_wait": (block, sys, "pf.attention_dispatch.row_store"),
        "cb.attention_combine.row_wait": (warp, sys, "cb.ffn_combine.row_store"),
    }


def test_scope_strength():
    assert Scope.SYS.covers(Scope.GPU) and Scope.GPU.covers(Scope.CTA)
    assert Scope.SYS.covers(Scope.SYS)
    assert not Scope.GPU.covers(Scope.SYS) and not Scope.CTA.covers(Scope.GPU)


def test_the_listing_says_each_contract(tmp_path, capsys):
    path = write(tmp_path, GOOD)
    assert main(["sites", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"fx.source.row_store          store    {path}:1-3",
        f"fx.source.flag_release       release  {path}:4-7 producers=warp scope=sys"
        " guards=fx.source.row_store",
        f"fx.sink.flag_wait            wait     {path}:8-10 consumers=thread scope=gpu"
        " guards=fx.source.row_store",
    ]


def test_the_outside_any_site_rule_speaks_the_targets_words(tmp_path):
    """A target's own flag helpers (its [target.contract] spellings) outside
    every site are findings; CUDA's words alone would not see them."""
    import re as re_

    from invariants.sync.sites import PRIMITIVE
    from invariants.sync.spellings import ContractSpellings, call_pattern, primitive_pattern

    (tmp_path / "k.cu").write_text(
        "__global__ void k(int* f, int* d) {\n"
        "  d[0] = 1;\n"
        "  st_flag(f, 1);\n"
        "  while (ld_flag(f) == 0) {}\n"
        "  __syncthreads();\n"
        "}\n"
    )
    spellings = ContractSpellings(
        release={"sys": call_pattern("st_flag")},
        acquire={"sys": call_pattern("ld_flag")},
        barrier={"block": call_pattern("__syncthreads")},
    )
    assert parse_tree(tmp_path)[1] == []  # CUDA's words: nothing there
    _, found = parse_tree(tmp_path, (), primitive_pattern(spellings))
    assert [(f.line, f.message) for f in found] == [
        (3, "ordering primitive st_flag( outside any site"),
        (4, "ordering primitive ld_flag( outside any site"),
    ]  # a barrier outside a site is no primitive
    assert primitive_pattern(None) is PRIMITIVE
    assert isinstance(primitive_pattern(spellings), re_.Pattern)
