// attention_dispatch: the attention (source) side of dispatch, both protocols.
//
// attention_route, launched just before on the same stream, has checked the
// whole step's routes (an invalid one trapped there: nothing of it is sent)
// and written one token bitmap per expert and per FFN rank. Every CTA copies
// their used words into shared memory and takes their word prefix sums, so
// every token knows its rank within each expert (the FFN places rows without
// sorting): its tokens are spread over the step and name any expert.
//
// Payload-first: counts and rows go out, then each CTA adds one to `done` on
// every FFN rank. Count-first: counts go out and are released first; each
// slot's flag follows its row (a warp releases a batch of its tokens' slots at
// once), so the FFN's epilogue can stream rows as they land; `done` still
// follows every row (the payload gate). With kArmAttention the
// source waits for each FFN's placement and stores every expert row itself.
#pragma once
#include "common/comm.cuh"
#include "common/dispatch.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

template <int kHidden, int kTopK, bool kFp8, bool kCountFirst, bool kArmAttention, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    attention_dispatch_impl(const Params* __restrict__ params, const void* __restrict__ x,
                         const float* __restrict__ x_scales, const i64* __restrict__ topk_idx,
                         const float* __restrict__ topk_weights,
                         const i32* __restrict__ num_tokens_ptr, const u32* __restrict__ maps) {
  static_assert(kCountFirst || !kArmAttention, "ARM=attention is a count-first variant");
  static_assert(kTopK <= 32, "one lane per top-k slot");
  constexpr int kNumWarps = kNumThreads / 32;
  constexpr int kFlagBatch = 4;  // count-first: tokens a warp writes before it publishes their slots
  extern __shared__ u32 smem[];

  const Params& p = *params;
  const auto [thread_idx, lane_idx, warp_idx] = thread_index();
  const auto [rank_idx, num_attention, capacity, experts_per_ffn] = geometry(p);
  const int words = bitmap_words(capacity);
  const int num_experts = static_cast<int>(p.num_experts);
  const int num_ffn = static_cast<int>(p.num_ffn);
  const int num_maps = num_experts + num_ffn;
  const int num_tokens = *num_tokens_ptr;
  // Words past the last token's hold padding only (clamped: thread 0 checks
  // num_tokens before anyone reads a bitmap).
  const int used_words = min(ceil_div(max(num_tokens, 0), 32), ceil_div(capacity, 32));
  const u64 epoch = step_epoch(p);
  u32* bits = smem;
  u32* prefix = smem + num_maps * words;
  // ARM=attention: each FFN's bases for this source, then its collect base.
  i32* direct_bases = reinterpret_cast<i32*>(prefix + num_maps * words);

  if (thread_idx == 0) {
    AFDEP_ASSERT(num_tokens >= 0 && num_tokens <= capacity, "num_tokens=%d outside [0, %d]",
                 num_tokens, capacity);
    AFDEP_ASSERT(sizeof(SlotMeta<kTopK>) <= p.slot_meta_bytes, "slot metadata %d > %llu bytes",
                 static_cast<int>(sizeof(SlotMeta<kTopK>)), p.slot_meta_bytes);
  }
  load_maps<kNumThreads>(maps, bits, num_maps, words, used_words, thread_idx);
  __syncthreads();
  scan_bitmaps<kNumThreads>(bits, prefix, num_maps, words, used_words, thread_idx);
  __syncthreads();

  if constexpr (kCountFirst) {
    // @site cf.attention_dispatch.count_put kind=store
    if (blockIdx.x == 0)
      put_counts<kNumThreads>(p, bits, prefix, words, used_words, num_tokens,
                              kProtocolCountFirst, thread_idx);
    // @end cf.attention_dispatch.count_put
    // @site cf.attention_dispatch.count_release kind=release producers=block scope=sys guards=cf.attention_dispatch.count_put
    if (blockIdx.x == 0) {
      __syncthreads();
      if (thread_idx == 0) {
        ptx::fence_acq_rel_sys();
        for (int ffn = 0; ffn < num_ffn; ++ffn)
          ptx::st_release_sys(peer_ptr<u64>(p, num_attention + ffn, p.off_count_ready) + rank_idx,
                              epoch);
      }
    }
    // @end cf.attention_dispatch.count_release
  } else {
    // @site pf.attention_dispatch.count_put kind=store
    if (blockIdx.x == 0)
      put_counts<kNumThreads>(p, bits, prefix, words, used_words, num_tokens,
                              kProtocolPayloadFirst, thread_idx);
    // @end pf.attention_dispatch.count_put
  }
  if (blockIdx.x == 0 && thread_idx == 0) {
    *local_ptr<i32>(p.num_tokens) = num_tokens;
    *local_ptr<i32>(p.protocol_log) = kCountFirst ? kProtocolCountFirst : kProtocolPayloadFirst;
  }

  if constexpr (kArmAttention) {
    // @site cf.attention_dispatch.prefix_wait kind=wait consumers=block scope=sys guards=cf.ffn_place.prefix_compute
    if (thread_idx == 0)
      for (int ffn = 0; ffn < num_ffn; ++ffn)
        wait_until(peer_ptr<const u64>(p, num_attention + ffn, p.off_prefix_ready), epoch,
                   "cf.attention_dispatch.prefix_wait", p);
    __syncthreads();
    // @end cf.attention_dispatch.prefix_wait
    for (int i = thread_idx; i < num_ffn * (experts_per_ffn + 1); i += kNumThreads) {
      const int ffn = i / (experts_per_ffn + 1), j = i % (experts_per_ffn + 1);
      const Placement remote = placement_at(
          peer_ptr<i32>(p, num_attention + ffn, p.off_placement), num_attention, experts_per_ffn);
      direct_bases[i] = ptx::ld_cg_s32(j < experts_per_ffn
                                           ? remote.bases + j * num_attention + rank_idx
                                           : remote.collect_bases + rank_idx);
    }
    __syncthreads();
  }

  // A warp takes tokens warp, warp + total_warps, ... as before, a batch of
  // them at a time: count-first publishes a batch's slots with one release
  // each, in one instruction across the lanes (lane i: the batch's i-th slot),
  // so the warp waits for its writes to land once per batch, not per token.
  const int total_warps = static_cast<int>(gridDim.x) * kNumWarps;
  const int batch = min(kFlagBatch, 32 / max(num_ffn, 1));  // a lane per slot of the batch
  for (int first = grid_warp_idx(warp_idx); first < num_tokens;
       first += batch * total_warps) {
    int num_pending = 0;   // slots written in this batch
    int pending_rank = 0;  // lane i: the FFN rank of the batch's i-th slot
    u64 pending_slot = 0;  // lane i: that slot
    for (int b = 0; b < batch; ++b) {
      const int token_idx = first + b * total_warps;
      if (token_idx >= num_tokens) break;  // warp-uniform
      const int slot_idx = lane_idx;
      const i64 expert = slot_idx < kTopK ? topk_idx[token_idx * kTopK + slot_idx] : -1;
      const float weight = slot_idx < kTopK ? topk_weights[token_idx * kTopK + slot_idx] : 0.0f;
      const int expert_ffn = expert >= 0 ? static_cast<int>(expert) / experts_per_ffn : -1;
      const u32 ffn_mask = __reduce_or_sync(kFullMask, expert >= 0 ? 1u << expert_ffn : 0u);
      if (lane_idx == 0) local_ptr<u32>(p.token_ffn_mask)[token_idx] = ffn_mask;

      for (u32 pending = ffn_mask; pending != 0; pending &= pending - 1) {
        const int ffn = __ffs(pending) - 1;
        const int ffn_rank = num_attention + ffn;
        const int e = static_cast<int>(expert);
        const bool here = expert_ffn == ffn;
        const int local_expert = here ? e % experts_per_ffn : -1;
        const int pos = here ? bitmap_rank(bits + e * words, prefix + e * words, token_idx) : -1;
        const int map = num_experts + ffn;
        const int collect_pos = bitmap_rank(bits + map * words, prefix + map * words, token_idx);
        // Count-first slots are compact (the FFN knows how many from the counts);
        // payload-first slots are indexed by token.
        const int slot_id = kCountFirst ? collect_pos : token_idx;
        const u64 slot = static_cast<u64>(rank_idx) * capacity + slot_id;
        auto* meta = reinterpret_cast<SlotMeta<kTopK>*>(
            peer_ptr<u8>(p, ffn_rank, p.off_slot_meta) + slot * p.slot_meta_bytes);
        u8* row = peer_ptr<u8>(p, ffn_rank, p.off_slot_rows) + slot * p.row_bytes;
        if constexpr (kCountFirst) {
          // @site cf.attention_dispatch.row_store kind=store
          write_slot_meta<kTopK>(meta, lane_idx, token_idx, collect_pos, local_expert, weight,
                                 pos, epoch);
          if constexpr (kArmAttention) {
            const i32* bases = direct_bases + ffn * (experts_per_ffn + 1);
            constexpr int kDestinations = 1 + kTopK;  // the collect row, then each slot's row
            int destinations[kDestinations];
            destinations[0] = p.collect_view ? bases[experts_per_ffn] + collect_pos : -1;
            const int mine =
                local_expert >= 0 && !p.collect_view ? bases[local_expert] + pos : -1;
#pragma unroll
            for (int k = 0; k < kTopK; ++k) destinations[1 + k] = __shfl_sync(kFullMask, mine, k);
            write_direct_rows<kHidden, kFp8, kDestinations>(
                peer_ptr<u8>(p, ffn_rank, p.off_direct_x),
                peer_ptr<float>(p, ffn_rank, p.off_direct_scales), x, x_scales, token_idx,
                destinations, lane_idx);
          } else {
            write_slot_row<kHidden, kFp8>(row, x, x_scales, token_idx, lane_idx);
          }
          // @end cf.attention_dispatch.row_store
          if (lane_idx == num_pending) pending_rank = ffn_rank, pending_slot = slot;
          ++num_pending;
        } else {
          // @site pf.attention_dispatch.row_store kind=store
          write_slot_meta<kTopK>(meta, lane_idx, token_idx, collect_pos, local_expert, weight,
                                 pos, epoch);
          write_slot_row<kHidden, kFp8>(row, x, x_scales, token_idx, lane_idx);
          // @end pf.attention_dispatch.row_store
        }
      }
    }
    if constexpr (kCountFirst) {
      const int ffn_rank = pending_rank;
      const u64 slot = pending_slot;
      // @site cf.attention_dispatch.row_release kind=release producers=warp scope=sys guards=cf.attention_dispatch.row_store
      __syncwarp();
      if (lane_idx < num_pending)
        ptx::st_release_sys(peer_ptr<u64>(p, ffn_rank, p.off_slot_flags) + slot, epoch);
      // @end cf.attention_dispatch.row_release
    }
  }

  if constexpr (kCountFirst) {
    // @site cf.attention_dispatch.done_release kind=release producers=block scope=sys guards=cf.attention_dispatch.row_store
    __syncthreads();
    if (thread_idx == 0) {
      ptx::fence_acq_rel_sys();
      for (int ffn = 0; ffn < num_ffn; ++ffn)
        ptx::red_add_release_sys(peer_ptr<u64>(p, num_attention + ffn, p.off_done) + rank_idx, 1);
    }
    // @end cf.attention_dispatch.done_release
  } else {
    // @site pf.attention_dispatch.done_release kind=release producers=block scope=sys guards=pf.attention_dispatch.row_store
    __syncthreads();
    if (thread_idx == 0) {
      ptx::fence_acq_rel_sys();
      for (int ffn = 0; ffn < num_ffn; ++ffn)
        ptx::red_add_release_sys(peer_ptr<u64>(p, num_attention + ffn, p.off_done) + rank_idx, 1);
    }
    // @end pf.attention_dispatch.done_release
  }
}

}  // namespace afdep
