// Every inline-PTX primitive afdep uses. Kernels hold no raw asm: they call
// these, and every call that orders memory lies inside a `// @site` region.
#pragma once
#include "common/types.cuh"

namespace afdep::ptx {

/// ---------------------------------------------------------------- timers
__device__ __forceinline__ u64 globaltimer() {
  u64 ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

/// ---------------------------------------------------------------- acquire / release
// System scope: the peers are other GPUs reached over NVLink.
__device__ __forceinline__ u64 ld_acquire_sys(const u64* ptr) {
  u64 value;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(ptr) : "memory");
  return value;
}

__device__ __forceinline__ u64 ld_relaxed_sys(const u64* ptr) {
  u64 value;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(ptr) : "memory");
  return value;
}

__device__ __forceinline__ void st_release_sys(u64* ptr, u64 value) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");
}

__device__ __forceinline__ void st_relaxed_sys(u64* ptr, u64 value) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");
}

/// ---------------------------------------------------------------- fences
__device__ __forceinline__ void fence_acq_rel_sys() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}

/// ---------------------------------------------------------------- red / atom
__device__ __forceinline__ void red_add_release_sys(u64* ptr, u64 value) {
  asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");
}

__device__ __forceinline__ u64 atom_cas_relaxed_sys(u64* ptr, u64 expected, u64 desired) {
  u64 old;
  asm volatile("atom.relaxed.sys.global.cas.b64 %0, [%1], %2, %3;"
               : "=l"(old)
               : "l"(ptr), "l"(expected), "l"(desired)
               : "memory");
  return old;
}

/// ---------------------------------------------------------------- conversions
// Two fp32 values to one bf16x2 word, round to nearest even, in one F2FP
// instruction (a NaN becomes the canonical 0x7fff, as torch's CUDA cast gives).
// PTX puts its first operand in the upper half: `lo` lands in bits 0..15.
__device__ __forceinline__ u32 cvt_rn_bf16x2(float lo, float hi) {
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

/// ---------------------------------------------------------------- 16-byte loads
// The same 16-byte load by two paths, its operands written once (`op`: the
// instruction but its type).
#define AFDEP_LD_V4(name, op)                                    \
  __device__ __forceinline__ int4 name(const int4* ptr) {        \
    int4 v;                                                      \
    asm volatile(op ".v4.s32 {%0, %1, %2, %3}, [%4];"            \
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)    \
                 : "l"(ptr));                                    \
    return v;                                                    \
  }
// Read-only inputs of this rank: the non-coherent path is safe, nothing writes them.
AFDEP_LD_V4(ld_nc_v4, "ld.global.nc.L1::no_allocate")
// Buffers a peer writes and this rank reuses every step: bypass L1, which is
// not coherent with NVLink writes and may hold the previous step's line.
AFDEP_LD_V4(ld_cg_v4, "ld.global.cg")
#undef AFDEP_LD_V4

// ld_nc_v4 issued only where `pred` holds (zeros elsewhere): predicated,
// not branched, so a run of them issues back to back with no math between.
__device__ __forceinline__ int4 ld_nc_v4_if(bool pred, const int4* ptr) {
  int4 v = make_int4(0, 0, 0, 0);
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
      "@p ld.global.nc.L1::no_allocate.v4.s32 {%0, %1, %2, %3}, [%5];\n\t}"
      : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
      : "r"(static_cast<int>(pred)), "l"(ptr));
  return v;
}

__device__ __forceinline__ int ld_cg_s32(const int* ptr) {
  int v;
  asm volatile("ld.global.cg.s32 %0, [%1];" : "=r"(v) : "l"(ptr));
  return v;
}

__device__ __forceinline__ float ld_cg_f32(const float* ptr) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(ptr));
  return v;
}

__device__ __forceinline__ u64 ld_cg_u64(const u64* ptr) {
  u64 v;
  asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(ptr));
  return v;
}

/// ---------------------------------------------------------------- programmatic launch
__device__ __forceinline__ void launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__device__ __forceinline__ void wait_prerequisites() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

}  // namespace afdep::ptx
