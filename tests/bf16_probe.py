"""A probe kernel around afdep's `pack_bf16x8` (common/layout.cuh), the only
fp32 → bf16 rounding the combines do: thread v packs the eight fp32 bit
patterns base + 8v … base + 8v + 7, so one launch covers a contiguous range
of patterns and the host needs no input buffer. Built by NVRTC from the same
headers as afdep's kernels."""

from __future__ import annotations

from pathlib import Path

CSRC = Path(__file__).parents[1] / "afdep" / "csrc"
KERNEL = "probe_pack_bf16x8"
SOURCE = r"""
#include "common/layout.cuh"
extern "C" __global__ void probe_pack_bf16x8(unsigned base, unsigned num_vecs, int4* out) {
  const unsigned v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= num_vecs) return;
  float values[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) values[i] = __uint_as_float(base + 8u * v + i);
  out[v] = afdep::pack_bf16x8(values);
}
"""


def compile_probe(arch: str, target: str = "cubin"):
    """The probe's cuda.core ObjectCode for `arch` ("sm_90"), as `target`."""
    from cuda.core import Program, ProgramOptions

    options = ProgramOptions(arch=arch, std="c++17", include_path=[str(CSRC)], name="bf16_probe.cu")
    program = Program(SOURCE, "c++", options)
    try:
        return program.compile(target)
    finally:
        program.close()
