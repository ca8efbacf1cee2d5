"""A small CUDA tree the init tests scan: a producer that stores, syncs its
block and publishes through an asm-wrapped release; a consumer that spins
on an asm-wrapped acquire, then syncs its block; a volatile spin elsewhere."""

from __future__ import annotations

from pathlib import Path

FLAGS = """\
#pragma once
__device__ __forceinline__ void st_flag_release(int* flag, int value) {
  asm volatile("st.release.sys.global.b32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ int ld_flag_acquire(const int* flag) {
  int value;
  asm volatile("ld.acquire.sys.global.b32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}
"""

KERNELS = """\
#include "flags.cuh"

__global__ void producer(int* data, int* flag, int epoch) {
  data[threadIdx.x] = epoch * 100 + threadIdx.x;
  data[blockDim.x + threadIdx.x] = epoch;
  __syncthreads();
  if (threadIdx.x == 0) {
    st_flag_release(flag, epoch);
  }
}

__global__ void consumer(const int* data, const int* flag, int* out, int epoch) {
  if (threadIdx.x == 0) {
    while (ld_flag_acquire(flag) < epoch) {
    }
  }
  __syncthreads();
  out[threadIdx.x] = data[threadIdx.x];
}
"""

LEGACY = """\
__global__ void legacy_wait(volatile int* flag, int epoch) {
  while (*flag < epoch) {
  }
}
"""


def write_tree(root: Path) -> Path:
    """The tree under `root/src`, returned."""
    sources = root / "src"
    sources.mkdir()
    (sources / "flags.cuh").write_text(FLAGS)
    (sources / "kernels.cu").write_text(KERNELS)
    (sources / "legacy.cu").write_text(LEGACY)
    return sources
