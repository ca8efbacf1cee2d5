"""`pack_bf16x8` rounds with the hardware's bf16x2 conversion: four F2FP
instructions for eight values (their values are checked bitwise against
torch on a GPU by tests/gpu/test_bf16_pack.py). NVRTC compiles without a GPU."""

from __future__ import annotations

from pathlib import Path

from faults.pipeline.erasure import disassemble, find_tool
from tests.bf16_probe import KERNEL, compile_probe


def test_pack_bf16x8_is_four_bf16x2_conversions(tmp_path: Path) -> None:
    cubin = tmp_path / "probe.cubin"
    cubin.write_bytes(bytes(compile_probe("sm_90").code))
    sass = disassemble(cubin, find_tool(), timeout_s=60)[KERNEL].splitlines()
    assert [line.split()[:1] for line in sass if "F2FP" in line] == [["F2FP.BF16.F32.PACK_AB"]] * 4
