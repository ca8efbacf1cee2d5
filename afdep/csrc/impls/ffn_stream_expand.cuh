// ffn_stream_expand: the FFN side of count-first dispatch, row by row.
//
// Launched early (programmatic dependent launch), it waits for the placement
// table and then streams: per slot, lane 0 waits for the slot's flag, the warp
// syncs, the slot's metadata is recorded and - unless the payload gate holds
// its source - the row is expanded to each of its expert rows. Gated sources'
// rows are expanded in a second pass, after their all-rows flag (the gate),
// by the warps that recorded them. kArmAttention: the source already stored the
// expert rows; only the metadata is recorded.
#pragma once
#include "common/comm.cuh"
#include "common/dispatch.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

__host__ __device__ constexpr int ffn_stream_expand_smem_ints(int num_attention,
                                                                int experts_per_ffn) {
  return placement_ints(num_attention, experts_per_ffn);
}

template <int kHidden, int kTopK, bool kFp8, bool kCollectView, bool kArmAttention, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    ffn_stream_expand_impl(const Params* __restrict__ params) {
  extern __shared__ i32 smem_i32[];
  const Params& p = *params;
  const auto [thread_idx, lane_idx, warp_idx] = thread_index();
  const auto [rank_idx, num_attention, capacity, experts_per_ffn] = geometry(p);
  const int warps = static_cast<int>(p.warp_count);
  const int unit = static_cast<int>(p.unit_min_rows);
  const u64 epoch = step_epoch(p);
  const int ints = placement_ints(num_attention, experts_per_ffn);
  const Placement placement = placement_at(smem_i32, num_attention, experts_per_ffn);

  // @site cf.ffn_stream_expand.prefix_wait kind=wait consumers=block scope=sys guards=cf.ffn_place.prefix_compute
  if (thread_idx == 0)
    wait_until(peer_ptr<const u64>(p, rank_idx, p.off_prefix_ready), epoch,
               "cf.ffn_stream_expand.prefix_wait", p);
  __syncthreads();
  // @end cf.ffn_stream_expand.prefix_wait

  const i32* table = peer_ptr<const i32>(p, rank_idx, p.off_placement);
  for (int i = thread_idx; i < ints; i += kNumThreads) smem_i32[i] = ptx::ld_cg_s32(table + i);
  __syncthreads();

  // A source is gated when the payload gate is on and its step is large
  // enough: its rows are expanded only after its all-rows flag (pass 1), so
  // their copies do not compete with the stream still arriving. Every slot's
  // metadata is recorded as its flag lands (pass 0), gated or not.
  auto gated = [&](int source) {
    return p.gate && placement.tokens[source] > static_cast<int>(p.ungated_tokens);
  };
  bool any_gated = false;
  for (int source = 0; source < num_attention; ++source) any_gated = any_gated || gated(source);

  const int total_warps = static_cast<int>(gridDim.x) * warps;
  const int first_warp = grid_warp_idx(warp_idx);
  const u64* flags = peer_ptr<const u64>(p, rank_idx, p.off_slot_flags);
  for (int pass = 0; pass < (any_gated ? 2 : 1); ++pass) {
    if (pass == 1) {
      // @site cf.ffn_stream_expand.gate_wait kind=wait consumers=block scope=sys guards=cf.attention_dispatch.row_store
      if (thread_idx == 0) {
        const u64* done = peer_ptr<const u64>(p, rank_idx, p.off_done);
        for (int source = 0; source < num_attention; ++source)
          if (gated(source))
            wait_until(done + source, epoch * p.source_ctas, "cf.ffn_stream_expand.gate_wait", p);
      }
      __syncthreads();
      // @end cf.ffn_stream_expand.gate_wait
    }
    if (warp_idx >= warps) continue;
    for (int source = 0; source < num_attention; ++source) {
      const bool expand = gated(source) == (pass == 1);
      if (pass == 1 && (!expand || kArmAttention)) continue;  // ARM=attention: nothing to expand
      const int slots = placement.collect_bases[source + 1] - placement.collect_bases[source];
      for (int start = first_warp * unit; start < slots; start += total_warps * unit) {
        for (int slot_id = start; slot_id < start + unit && slot_id < slots; ++slot_id) {
          const u64 slot = static_cast<u64>(source) * capacity + slot_id;
          if (pass == 0) {
            // @site cf.ffn_stream_expand.row_wait kind=wait consumers=warp scope=sys guards=cf.attention_dispatch.row_store
            if (lane_idx == 0) wait_until(flags + slot, epoch, "cf.ffn_stream_expand.row_wait", p);
            __syncwarp();
            // @end cf.ffn_stream_expand.row_wait
          }
          // @site cf.ffn_stream_expand.expand kind=store
          const auto* meta = reinterpret_cast<const SlotMeta<kTopK>*>(
              peer_ptr<const u8>(p, rank_idx, p.off_slot_meta) + slot * p.slot_meta_bytes);
          const u8* row = peer_ptr<const u8>(p, rank_idx, p.off_slot_rows) + slot * p.row_bytes;
          receive_slot<kHidden, kTopK, kFp8, kCollectView, !kArmAttention>(
              p, placement, source, load_slot_fields(meta, lane_idx), row, epoch, lane_idx,
              /*record=*/pass == 0, expand);
          // @end cf.ffn_stream_expand.expand
        }
      }
    }
  }
}

}  // namespace afdep
