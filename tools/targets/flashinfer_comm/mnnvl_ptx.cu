// Our translation unit of trtllm_mnnvl_allreduce.cuh's kernels, for the
// publish contract's PTX only (the catalog's `ptx` command; docs/targets.md,
// "trtllm_mnnvl_allreduce.cuh: sites held to the contract, no run"). No
// harness runs these kernels: MNNVL reaches its peers through NVLink
// multicast, which one GPU does not have. It compiles, never links, never
// runs: it takes the address of the one-shot Lamport kernel (its
// LamportFlags<..., UseCGA=true> arrival, a cluster barrier) and the two-shot
// kernel (LamportFlags' named-barrier arrival) for bf16 at 2 ranks, so the
// PTX carries every release of the header's sites.
//
// Older releases of the header (a foreign corpus's bases) name their kernels
// otherwise: where one of these names is not the header's, the probe's
// declaration below is found instead, nothing is instantiated, and the file
// still compiles (no site of the catalog resolves in those releases' MNNVL
// code, so none needs its PTX).

#include <cuda_bf16.h>

#include <cstdint>

// What code the fault engine injects into the header may call (the catalog's
// clock and rank), as harness.cu defines them; no rank runs here.
__device__ __forceinline__ unsigned long long faults_globaltimer() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__device__ __forceinline__ int faults_rank() { return 0; }

#include "flashinfer/comm/trtllm_mnnvl_allreduce.cuh"

namespace faults_probe {
template <uint8_t WorldSize, typename T, bool RMSNormFusion = false>
__global__ void oneshotAllreduceFusionKernel(int);
template <uint8_t WorldSize, typename T>
__global__ void twoshotAllreduceKernel(int);
}  // namespace faults_probe

// Qualified lookup finds the header's own kernel first; the probe only where
// the header has none of that name.
namespace flashinfer {
namespace trtllm_mnnvl_allreduce {
using namespace ::faults_probe;
}  // namespace trtllm_mnnvl_allreduce
}  // namespace flashinfer

namespace mnnvl = flashinfer::trtllm_mnnvl_allreduce;

void const* const faults_mnnvl_kernels[] = {
    reinterpret_cast<void const*>(&mnnvl::oneshotAllreduceFusionKernel<2, __nv_bfloat16, true>),
    reinterpret_cast<void const*>(&mnnvl::twoshotAllreduceKernel<2, __nv_bfloat16>),
};
