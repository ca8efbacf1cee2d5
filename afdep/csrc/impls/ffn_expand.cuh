// ffn_expand: the FFN side of payload-first dispatch.
//
// Waits until every source has released all of its rows, builds the placement
// table from the count table, then copies each received slot into the
// expert-major layout (or, with the collect view, once into the collect
// layout) and records, per slot, the rows and weights combine needs.
#pragma once
#include "common/comm.cuh"
#include "common/dispatch.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

// Shared memory, in i32: the placement table, then E_f ints of scratch.
__host__ __device__ constexpr int ffn_expand_smem_ints(int num_attention, int experts_per_ffn) {
  return placement_ints(num_attention, experts_per_ffn) + experts_per_ffn;
}

template <int kHidden, int kTopK, bool kFp8, bool kCollectView, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    ffn_expand_impl(const Params* __restrict__ params) {
  constexpr int kNumWarps = kNumThreads / 32;
  extern __shared__ i32 smem_i32[];

  const Params& p = *params;
  const auto [thread_idx, lane_idx, warp_idx] = thread_index();
  const auto [rank_idx, num_attention, capacity, experts_per_ffn] = geometry(p);
  const u64 epoch = step_epoch(p);
  const Placement placement = placement_at(smem_i32, num_attention, experts_per_ffn);
  i32* totals = smem_i32 + placement_ints(num_attention, experts_per_ffn);

  // @site pf.ffn_expand.done_wait kind=wait consumers=block scope=sys guards=pf.attention_dispatch.row_store
  if (thread_idx == 0) {
    const u64* done = peer_ptr<const u64>(p, rank_idx, p.off_done);
    for (int source = 0; source < num_attention; ++source)
      wait_until(done + source, epoch * p.source_ctas, "pf.ffn_expand.done_wait", p);
  }
  __syncthreads();
  // @end pf.ffn_expand.done_wait

  compute_placement<kNumThreads>(p, placement, totals, kProtocolPayloadFirst, thread_idx);
  if (blockIdx.x == 0) {
    for (int j = thread_idx; j <= experts_per_ffn; j += kNumThreads)
      local_ptr<i32>(p.out_expert_offsets)[j] = placement.offsets[j];
    if (thread_idx == 0) *local_ptr<i32>(p.protocol_log) = kProtocolPayloadFirst;
  }

  // @site pf.ffn_expand.copy kind=store
  const int total_warps = static_cast<int>(gridDim.x) * kNumWarps;
  for (int source = 0; source < num_attention; ++source) {
    for (int token_idx = grid_warp_idx(warp_idx);
         token_idx < placement.tokens[source]; token_idx += total_warps) {
      const u64 slot = static_cast<u64>(source) * capacity + token_idx;
      const auto* meta = reinterpret_cast<const SlotMeta<kTopK>*>(
          peer_ptr<const u8>(p, rank_idx, p.off_slot_meta) + slot * p.slot_meta_bytes);
      const SlotFields fields = load_slot_fields(meta, lane_idx);
      if (fields.epoch != epoch) continue;  // not routed here this step
      const u8* row = peer_ptr<const u8>(p, rank_idx, p.off_slot_rows) + slot * p.row_bytes;
      receive_slot<kHidden, kTopK, kFp8, kCollectView, true>(p, placement, source, fields, row,
                                                             epoch, lane_idx);
    }
  }
  // @end pf.ffn_expand.copy
}

}  // namespace afdep
