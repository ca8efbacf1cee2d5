"""afdep.jit: digest, NVRTC compile (no GPU), cubin cache, named specs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from afdep import jit
from afdep.jit import CSRC, CompileError, KernelSpec, cache_key, compile_kernel, source_digest
from afdep.workspace import PARAM_FIELDS

SPEC = KernelSpec.make("attention_combine", kHidden=256, kNumThreads=512)


@pytest.fixture
def jit_cache(tmp_path, monkeypatch):
    cache = tmp_path / "jit"
    monkeypatch.setenv("AFDEP_JIT_CACHE", str(cache))
    return cache


@pytest.fixture
def csrc_copy(tmp_path):
    root = tmp_path / "csrc"
    shutil.copytree(CSRC, root)
    return root


def test_build_compiles_every_kernel_for_the_driver_configs(jit_cache, capsys):
    from afdep.build import all_specs
    from tools.build import main

    assert main([]) == 0
    specs = all_specs([2048, 7168], [8], ["bf16", "fp8"])
    assert {s.name for s in specs} == set(jit.KERNEL_TEMPLATES)
    entries = sorted(p.name for p in jit_cache.iterdir())
    assert len(entries) == len(specs) == 42
    assert not [name for name in entries if name.endswith(".tmp")]
    assert main([]) == 0  # the second pass is served from the cache
    assert capsys.readouterr().out.count("cached") == 42


def test_cache_entry_holds_symbol_and_cubin(jit_cache):
    first = compile_kernel(SPEC)
    again = compile_kernel(SPEC)
    assert not first.from_cache and again.from_cache
    assert again.symbol == first.symbol and again.cubin == first.cubin
    assert first.symbol.startswith("_ZN5afdep22attention_combine_impl")
    assert first.cubin[:4] == b"\x7fELF"
    assert first.path.name.startswith("attention_combine-")


def test_corrupt_cache_entry_is_an_error_naming_the_file(jit_cache):
    entry = compile_kernel(SPEC).path
    entry.write_bytes(b"no newline here")
    with pytest.raises(CompileError, match=re.escape(str(entry))):
        compile_kernel(SPEC)


def test_digest_changes_when_and_only_when_csrc_changes(csrc_copy, tmp_path):
    original = source_digest(csrc_copy)
    assert original == source_digest(CSRC)
    (tmp_path / "outside.txt").write_text("not part of csrc")
    assert source_digest(csrc_copy) == original
    header = csrc_copy / "common" / "types.cuh"
    text = header.read_text()
    header.write_text(text + " ")
    assert source_digest(csrc_copy) != original
    header.write_text(text)
    assert source_digest(csrc_copy) == original
    header.rename(csrc_copy / "common" / "types2.cuh")
    assert source_digest(csrc_copy) != original


def test_cache_key_covers_digest_template_arch_and_nvrtc():
    other = KernelSpec.make("attention_combine", kHidden=512, kNumThreads=512)
    base = cache_key(SPEC, "d" * 64, "sm_90a", "13.0")
    assert (
        len(
            {
                base,
                cache_key(other, "d" * 64, "sm_90a", "13.0"),
                cache_key(SPEC, "e" * 64, "sm_90a", "13.0"),
                cache_key(SPEC, "d" * 64, "sm_100a", "13.0"),
                cache_key(SPEC, "d" * 64, "sm_90a", "13.1"),
            }
        )
        == 5
    )


def test_a_patched_tree_gets_its_own_cubin(jit_cache, csrc_copy):
    original = compile_kernel(SPEC)
    header = csrc_copy / "impls" / "attention_combine.cuh"
    text = header.read_text()
    assert "= __fadd_rn(acc" in text  # the sum this test turns into a difference
    header.write_text(text.replace("= __fadd_rn(acc", "= __fsub_rn(acc"))
    patched = compile_kernel(SPEC, root=csrc_copy)
    assert patched.path != original.path and patched.cubin != original.cubin


def test_compile_error_carries_the_compiler_log(jit_cache, csrc_copy):
    header = csrc_copy / "impls" / "attention_combine.cuh"
    header.write_text(header.read_text().replace("const int num_tokens", "const int num_tokens +"))
    with pytest.raises(CompileError) as error:
        compile_kernel(SPEC, root=csrc_copy)
    message = str(error.value)
    assert "attention_combine<kHidden=256, kNumThreads=512> failed to compile for sm_90a" in message
    assert "attention_combine.cuh" in message and "error" in message
    assert not list(jit_cache.glob("attention_combine-*"))


def test_a_tree_that_fails_to_compile_fails_the_build_without_a_traceback(tmp_path, csrc_copy):
    """Every variant names its failure with the compiler's log, and the failed
    programs are freed before the interpreter exits: no traceback from
    cuda.core's clean-up follows them."""
    header = csrc_copy / "impls" / "attention_combine.cuh"
    header.write_text(header.read_text().replace("const int num_tokens", "const int num_tokens +"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.build",
            "--csrc",
            str(csrc_copy),
            "--hidden",
            "2048",
            "--payload",
            "bf16",
            "--view",
            "expanded",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "AFDEP_JIT_CACHE": str(tmp_path / "jit")},
    )
    assert done.returncode == 1
    failed = [line for line in done.stderr.splitlines() if line.startswith("FAILED ")]
    assert failed == [
        "FAILED attention_combine<kHidden=2048, kNumThreads=512>",
    ]
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_jit_source_is_an_include_and_one_named_instantiation():
    spec = KernelSpec.make(
        "ffn_expand", kHidden=2048, kTopK=8, kFp8=True, kCollectView=False, kNumThreads=512
    )
    source = spec.jit_source()
    assert source.startswith('#include "impls/ffn_expand.cuh"\n')
    assert "/* kHidden */ 2048" in source and "/* kFp8 */ true" in source
    assert spec.name_expression() == "afdep::ffn_expand_impl<2048, 8, true, false, 512>"


def test_kernel_spec_rejects_unknown_kernels_and_arguments():
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        KernelSpec.make("nope", kHidden=1)
    with pytest.raises(ValueError, match=r"takes template arguments \['kHidden', 'kNumThreads'\]"):
        KernelSpec.make("attention_combine", kHidden=256)


def test_every_kernel_header_defines_its_impl():
    for name in jit.KERNEL_TEMPLATES:
        header = (CSRC / "impls" / f"{name}.cuh").read_text()
        assert f"{name}_impl(" in header, name


def test_params_struct_matches_python_field_list():
    text = (CSRC / "common" / "params.cuh").read_text()
    body = text[text.index("struct Params {") : text.index("};", text.index("struct Params {"))]
    fields = re.findall(r"^\s*(\w+)\s+(\w+);", body, re.MULTILINE)
    assert [name for _, name in fields] == list(PARAM_FIELDS)
    assert {kind for kind, _ in fields} == {"u64"}


def test_kernels_hold_no_raw_asm():
    for header in (CSRC / "impls").glob("*.cuh"):
        assert "asm" not in header.read_text(), header.name


def test_the_widest_fp8_rows_the_validation_runs_compile(jit_cache):
    from afdep.build import all_specs
    from tools.validate.matrix import WIDEST_FP8

    specs = all_specs([WIDEST_FP8], [8], ["fp8"])
    compiled = [compile_kernel(spec) for spec in specs]
    assert {s.name for s in specs} == set(jit.KERNEL_TEMPLATES)
    assert all(c.cubin[:4] == b"\x7fELF" for c in compiled)
