"""Erased faults (faults/pipeline/erasure.py): SASS with the compiler's noise taken out,
the disassembler found or named, and ERASED decided on real afdep builds."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
import time
from pathlib import Path

import pytest

from faults.catalog import CatalogError, load_catalog
from faults.catalog.model import Fault, Patch
from faults.generate.site_faults import with_generated
from faults.judge.verdict import Verdict
from faults.pipeline.apply import apply_patches
from faults.pipeline.erasure import ErasedCheck, SassError, find_tool, normalize
from faults.pipeline.scratch import make_scratch
from invariants.sync.sites import SourceTree

REPO = Path(__file__).parents[4]

# nvdisasm -c's listing, cut down: a header, two functions, each with its
# entry label, its section label, layout lines, addresses and reuse hints.
LISTING = """\
\t.target\tsm_90a

\t.elftype\t@"ET_EXEC"


//--------------------- .text._Z4demoPi --------------------------
\t.section\t.text._Z4demoPi,"ax",@progbits
\t.align\t128
        .global         _Z4demoPi
        .type           _Z4demoPi,@function
        .size           _Z4demoPi,(.L_x_9 - _Z4demoPi)
_Z4demoPi:
.text._Z4demoPi:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R12, SR_TID.X ;
        /*0020*/                   R2UR UR6, R12.reuse ;
        /*0030*/                   ISETP.NE.AND P3, PT, R12, RZ, PT ;
        /*0040*/              @!P3 BRA `(.L_x_7) ;
        /*0050*/                   LDC.64 R10, c[0x4][0xa0] ;
        /*0060*/                   IADD3 R7, R12, -R1, RZ ;
.L_x_7:
        /*0070*/                   EXIT ;
//--------------------- .text._Z5otherv --------------------------
_Z5otherv:
.text._Z5otherv:
        /*0000*/                   MOV R5, 0x1 ;
        /*0010*/                   EXIT ;
"""


def test_normalize_takes_out_addresses_register_and_label_numbers_and_global_offsets():
    assert normalize(LISTING) == {
        "_Z4demoPi": (
            "LDC R0, c[0x0][0x28] ;\n"
            "S2R R1, SR_TID.X ;\n"
            "R2UR UR0, R1 ;\n"
            "ISETP.NE.AND P0, PT, R1, RZ, PT ;\n"
            "@!P0 BRA `(.L0) ;\n"
            "LDC.64 R2, c[0x4][ADDR] ;\n"
            "IADD3 R3, R1, -R0, RZ ;\n"
            ".L0:\n"
            "EXIT ;\n"
        ),
        "_Z5otherv": "MOV R0, 0x1 ;\nEXIT ;\n",
    }


def test_a_renaming_is_noise_but_swapped_operands_are_not():
    body = "        /*0000*/   IADD3 R7, R12, -R3, RZ ;\n        /*0010*/   STG.E [R7], R3 ;\n"
    listing = "_Z1fv:\n.text._Z1fv:\n" + body
    renamed = listing.replace("R12", "R40").replace("R3", "R2")
    swapped = listing.replace("R12, -R3", "R3, -R12")
    assert normalize(renamed) == normalize(listing)
    assert normalize(swapped) != normalize(listing)


def fake_site(monkeypatch, tmp_path: Path, site: Path) -> None:
    """Only `site` on sys.path, and no CUDA toolkit."""
    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit"))


def test_the_disassembler_is_found_on_path_first_then_in_the_wheel(tmp_path, monkeypatch):
    wheel = tmp_path / "site/nvidia"
    (wheel / "cu13/bin").mkdir(parents=True)
    (wheel / "cu13/bin/nvdisasm").write_text("#!/bin/sh\n")
    os.chmod(wheel / "cu13/bin/nvdisasm", 0o755)
    fake_site(monkeypatch, tmp_path, tmp_path / "site")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_tool() == wheel / "cu13/bin/nvdisasm"
    (tmp_path / "path").mkdir()
    (tmp_path / "path/nvdisasm").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "path/nvdisasm", 0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    assert find_tool() == tmp_path / "path/nvdisasm"


def test_a_missing_disassembler_is_one_line_naming_it_and_its_wheel(tmp_path, monkeypatch):
    fake_site(monkeypatch, tmp_path, tmp_path / "site")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SassError) as raised:
        find_tool()
    assert str(raised.value) == (
        f"nvdisasm not found on PATH, in {tmp_path}/no-toolkit/bin nor in the "
        "nvidia-cuda-nvdisasm wheel: pip install nvidia-cuda-nvdisasm"
    )


# ------------------------------------------------------- real afdep builds
# The count-first, FFN-armed bf16 variants only (6 of the catalog's 16, the
# route kernel among them): the sites below all compile into them.
FEW_VARIANTS = (
    "{python}", "-m", "tools.build", "--hidden", "2048", "--payload", "bf16",
    "--protocol", "count-first", "--arm", "ffn", "--view", "expanded",
    "--csrc", "{sources}", "--cubin", "{out}",
)  # fmt: skip
RELEASE = (
    "      if (lane_idx < num_pending)\n"
    "        ptx::st_release_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags)"
)


def text_fault(fault_id: str, file: str, old: str, new: str) -> Fault:
    return Fault(fault_id, fault_id, "fail", (Patch(fault_id, file=file, old=old, new=new),))


ERASABLE = {
    # A weaken-acquire mutant's twin alone: a copy of wait_until no site calls.
    "E.twin": Fault(
        "E.twin",
        "E.twin",
        "fail",
        (
            dataclasses.replace(
                with_generated(load_catalog(REPO / "catalogs/afdep.toml"), REPO)
                .fault("gen.weaken-acquire.cf.ffn_place.count_wait")
                .patches[1],
                owner="E.twin",
            ),
        ),
    ),
    # A guard the compiler proves true: lane_idx is threadIdx.x % 32.
    "E.guard": text_fault(
        "E.guard",
        "impls/attention_dispatch.cuh",
        RELEASE,
        RELEASE.replace("lane_idx < num_pending)", "lane_idx < num_pending && lane_idx < 32)"),
    ),
}


@pytest.fixture(scope="module")
def check(tmp_path_factory) -> ErasedCheck:
    folder = tmp_path_factory.mktemp("sass")
    catalog = load_catalog(REPO / "catalogs/afdep.toml")
    catalog = dataclasses.replace(
        catalog,
        target=dataclasses.replace(catalog.target, sass=FEW_VARIANTS),
        faults={**catalog.faults, **ERASABLE},
    )
    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("AFDEP_JIT_CACHE", str(folder / "jit"))  # the module's own cubins
        yield ErasedCheck(catalog, REPO, folder / "work", cache=folder / "cache")


@pytest.mark.parametrize("fault_id", sorted(ERASABLE))
def test_a_change_the_compiler_erases_is_erased(check, fault_id, tmp_path):
    judgement = check(fault_id, tmp_path)
    assert judgement is not None
    assert (judgement.verdict, judgement.ok) == (Verdict.ERASED, True)
    assert judgement.reason == (
        "every kernel's SASS (6 variants) is the clean tree's, addresses and register "
        "numbers aside: the compiler erased the change; not run"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unmarked-cubins.log"]


def test_a_delay_is_not_erased_and_the_first_difference_is_named(check, tmp_path):
    """P1 delays cf.attention_dispatch.row_store on the globaltimer: code the hardware runs."""
    assert check("P1", tmp_path) is None
    tree = tmp_path / "tree"
    make_scratch(REPO, tree)
    sources = SourceTree(tree / check.target.sources)
    apply_patches(sources, check.catalog, check.catalog.all_patches("P1"), bare=True)
    found, variants = check.difference(tree, tmp_path / "cubins")
    assert variants == 6
    assert found.startswith(
        "attention_dispatch<kHidden=2048, kTopK=8, kFp8=false, kCountFirst=true, "
        "kArmAttention=false, kNumThreads=512>: _ZN5afdep23attention_dispatch_impl"
    )
    assert found.endswith(" of its normalized SASS")


def test_only_the_variants_a_fault_touches_are_compiled_and_disassembled(
    check, tmp_path, monkeypatch
):
    """The clean tree's cubins, cached by what each kernel includes, are the
    faulted tree's byte for byte where the fault changed none of its files:
    those variants are neither compiled nor disassembled again."""
    check.clean()
    tree = tmp_path / "tree"
    make_scratch(REPO, tree)
    sources = SourceTree(tree / check.target.sources)
    apply_patches(sources, check.catalog, check.catalog.all_patches("P1"), bare=True)
    disassembled = []
    monkeypatch.setattr(check, "_disassemble", lambda cubin: disassembled.append(cubin.name) or {})
    found, variants = check.difference(tree, tmp_path / "cubins")
    assert (found is not None, variants) == (True, 6)
    assert disassembled == [  # P1 edits impls/attention_dispatch.cuh alone
        "attention_dispatch-Hidden2048-TopK8-Fp8false-CountFirsttrue-ArmAttentionfalse-"
        "NumThreads512.cubin"
    ]
    others = [
        line.split()[0]
        for line in (tmp_path / "cubins.log").read_text().splitlines()[1:]
        if "attention_dispatch<" not in line
    ]
    assert others == ["cached"] * 5


# ------------------------------------------- cubins read as they are written
# A cubin command that writes a.cubin (the clean bytes), then b.cubin, then
# waits WAIT_S before c.cubin and its index: each cubin whole, by a rename.
STREAMING = """\
import json, os, sys, time
from pathlib import Path
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
def write(name, data):
    (out / f".{name}.tmp").write_bytes(data)
    os.replace(out / f".{name}.tmp", out / name)
    print(name, flush=True)
write("a.cubin", b"clean a")
write("b.cubin", os.environ["B_BYTES"].encode())
time.sleep(float(os.environ["WAIT_S"]))
write("c.cubin", b"clean c")
(out / "index.json").write_text(json.dumps({n: n[0].upper() for n in os.environ["INDEX"].split()}))
"""
CLEAN_SASS = {"a.cubin": {"f": "A\n"}, "b.cubin": {"f": "B\n"}, "c.cubin": {"f": "C\n"}}


@pytest.fixture
def streaming(tmp_path, monkeypatch):
    """An ErasedCheck over the command above, the clean code given, and the
    cubins it disassembled."""
    script = tmp_path / "cubins.py"
    script.write_text(STREAMING)
    catalog = load_catalog(REPO / "catalogs/afdep.toml")
    sass = ("{python}", str(script), "{out}")
    catalog = dataclasses.replace(catalog, target=dataclasses.replace(catalog.target, sass=sass))
    check = ErasedCheck(catalog, REPO, tmp_path / "work", tool=Path("unused"))
    digest = {name: hashlib.sha256(f"clean {name[0]}".encode()).hexdigest() for name in CLEAN_SASS}
    labels = {name: f"kernel<{name[0]}>" for name in CLEAN_SASS}
    clean = {"sha256": digest, "sass": CLEAN_SASS, "labels": labels}
    monkeypatch.setattr(check, "clean", lambda: clean)
    check.disassembled = []

    def disassemble(cubin: Path) -> dict[str, str]:
        check.disassembled.append(cubin.name)
        return {"f": "B\n" if cubin.read_bytes() == b"same code" else "other\n"}

    monkeypatch.setattr(check, "_disassemble", disassemble)
    monkeypatch.setenv("INDEX", "a.cubin b.cubin c.cubin")
    return check


def test_the_first_cubin_whose_sass_differs_ends_the_command(streaming, tmp_path, monkeypatch):
    """a.cubin is the clean bytes: not disassembled; b.cubin's SASS differs:
    the command is ended before it writes c.cubin, a minute later."""
    monkeypatch.setenv("B_BYTES", "changed code")
    monkeypatch.setenv("WAIT_S", "60")
    started = time.perf_counter()
    found = streaming.difference(tmp_path, tmp_path / "cubins")
    assert found == ("kernel<b>: f line 1 of its normalized SASS", 3)
    assert time.perf_counter() - started < 15
    assert streaming.disassembled == ["b.cubin"]
    assert (tmp_path / "cubins.log").read_text() == "a.cubin\nb.cubin\n"
    assert not (tmp_path / "cubins").exists()


def test_an_erased_tree_is_compared_whole(streaming, tmp_path, monkeypatch):
    """b.cubin's bytes differ but its SASS is the clean one's: every cubin
    is read, to the index."""
    monkeypatch.setenv("B_BYTES", "same code")
    monkeypatch.setenv("WAIT_S", "0.2")
    assert streaming.difference(tmp_path, tmp_path / "cubins") == (None, 3)
    assert streaming.disassembled == ["b.cubin"]
    assert (tmp_path / "cubins.log").read_text() == "a.cubin\nb.cubin\nc.cubin\n"
    monkeypatch.setenv("INDEX", "a.cubin b.cubin c.cubin d.cubin")
    assert streaming.difference(tmp_path, tmp_path / "cubins") == (
        "its variants differ: ['d.cubin']",
        4,
    )


# ------------------------------------------------------------- the catalog
def test_the_afdep_sass_command_makes_the_variants_the_build_makes():
    target = load_catalog(REPO / "catalogs/afdep.toml").target
    assert target.sass == (*target.build, "--csrc", "{sources}", "--cubin", "{out}")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[target.sass]\nptx = []", "a table with one key, cubin; got {'ptx': []}"),
        (
            '[target.sass]\ncubin = ["{python}", "{digest}"]',
            "cubin: unknown placeholder {digest} in '{digest}'; "
            "known: {tree}, {sources}, {out}, {python}",
        ),
    ],
)
def test_a_bad_sass_table_is_one_line_naming_it(tmp_path, table, message):
    text = (REPO / "tests/fixtures/flag_payload/catalog.toml").read_text()
    path = tmp_path / "catalog.toml"
    path.write_text(text.replace("[target.log]", f"{table}\n\n[target.log]", 1))
    with pytest.raises(CatalogError) as raised:
        load_catalog(path, tree_root=REPO)
    assert str(raised.value) == f"{path}: target.sass: {message}"
