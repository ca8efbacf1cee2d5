// ffn_place: the FFN side of count-first dispatch, before the rows.
//
// One CTA waits for every source's counts, lets the streaming epilogue launch
// (programmatic dependent launch), builds the placement table and releases
// it. The epilogue waits for that release before it places any row.
#pragma once
#include "common/comm.cuh"
#include "common/dispatch.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

__host__ __device__ constexpr int ffn_place_smem_ints(int num_attention,
                                                                int experts_per_ffn) {
  return experts_per_ffn;  // scratch for the per-expert totals
}

template <int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    ffn_place_impl(const Params* __restrict__ params) {
  const Params& p = *params;
  const auto [thread_idx, lane_idx, warp_idx] = thread_index();
  const auto [rank_idx, num_attention, capacity, experts_per_ffn] = geometry(p);
  const u64 epoch = step_epoch(p);
  extern __shared__ i32 smem_i32[];

  // @site cf.ffn_place.count_wait kind=wait consumers=block scope=sys guards=cf.attention_dispatch.count_put
  if (thread_idx == 0) {
    const u64* count_ready = peer_ptr<const u64>(p, rank_idx, p.off_count_ready);
    for (int source = 0; source < num_attention; ++source)
      wait_until(count_ready + source, epoch, "cf.ffn_place.count_wait", p);
  }
  __syncthreads();
  // @end cf.ffn_place.count_wait

  ptx::launch_dependents();  // the epilogue may start: it waits for prefix_ready itself

  // @site cf.ffn_place.prefix_compute kind=compute
  const Placement placement =
      placement_at(peer_ptr<i32>(p, rank_idx, p.off_placement), num_attention, experts_per_ffn);
  compute_placement<kNumThreads>(p, placement, smem_i32, kProtocolCountFirst, thread_idx);
  for (int j = thread_idx; j <= experts_per_ffn; j += kNumThreads)
    local_ptr<i32>(p.out_expert_offsets)[j] = placement.offsets[j];
  if (thread_idx == 0) *local_ptr<i32>(p.protocol_log) = kProtocolCountFirst;
  // @end cf.ffn_place.prefix_compute

  // @site cf.ffn_place.prefix_release kind=release producers=block scope=sys guards=cf.ffn_place.prefix_compute
  __syncthreads();
  if (thread_idx == 0) {
    ptx::fence_acq_rel_sys();  // sources read the table too (ARM=attention)
    ptx::st_release_sys(peer_ptr<u64>(p, rank_idx, p.off_prefix_ready), epoch);
  }
  // @end cf.ffn_place.prefix_release
}

}  // namespace afdep
