// source_dispatch: the attention (source) side of payload-first dispatch.
//
// Every CTA first checks the whole step's routes and builds, in shared memory,
// one token bitmap per expert and per FFN rank with their word prefix sums; so
// no CTA sends anything from an invalid step, and every token knows its rank
// within each expert (the FFN then places rows without sorting). Warps then
// send each token once per FFN rank it routes to, with its metadata; each CTA
// finally releases one increment of `done[source]` on every FFN rank.
#pragma once
#include "common/comm.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

// Shared memory: (experts + FFN ranks) bitmaps of ceil(capacity / 32) words,
// then as many word prefix sums.
__device__ __forceinline__ int bitmap_rank(const u32* bits, const u32* prefix, int token_idx) {
  const int word = token_idx >> 5;
  const u32 below = (1u << (token_idx & 31)) - 1u;
  return static_cast<int>(prefix[word]) + __popc(bits[word] & below);
}

template <int kHidden, int kTopK, bool kFp8, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    source_dispatch_impl(const Params* __restrict__ params, const void* __restrict__ x,
                         const float* __restrict__ x_scales, const i64* __restrict__ topk_idx,
                         const float* __restrict__ topk_weights,
                         const i32* __restrict__ num_tokens_ptr) {
  using Shape = RowShape<kHidden, kFp8>;
  constexpr int kNumWarps = kNumThreads / 32;
  static_assert(kTopK <= 32, "one lane per top-k slot");
  extern __shared__ u32 smem[];

  const Params& p = *params;
  const int thread_idx = static_cast<int>(threadIdx.x);
  const int lane_idx = thread_idx % 32;
  const int warp_idx = thread_idx / 32;
  const int rank_idx = static_cast<int>(p.rank);
  const int num_experts = static_cast<int>(p.num_experts);
  const int num_ffn = static_cast<int>(p.num_ffn);
  const int num_attention = static_cast<int>(p.num_attention);
  const int capacity = static_cast<int>(p.capacity);
  const int experts_per_ffn = static_cast<int>(p.experts_per_ffn);
  const int words = ceil_div(capacity, 32);
  const int num_maps = num_experts + num_ffn;
  const int num_tokens = *num_tokens_ptr;
  const u64 epoch = *local_ptr<const u64>(p.epoch);
  u32* bits = smem;
  u32* prefix = smem + num_maps * words;

  if (thread_idx == 0) {
    AFDEP_ASSERT(num_tokens >= 0 && num_tokens <= capacity, "num_tokens=%d outside [0, %d]",
                 num_tokens, capacity);
    AFDEP_ASSERT(sizeof(SlotMeta<kTopK>) <= p.slot_meta_bytes, "slot metadata %d > %llu bytes",
                 static_cast<int>(sizeof(SlotMeta<kTopK>)), p.slot_meta_bytes);
  }
  for (int i = thread_idx; i < num_maps * words; i += kNumThreads) bits[i] = 0;
  __syncthreads();

  // @site pf.source.route_layout kind=compute
  // Check every route, padding included (a thread per token, its row in
  // registers), and mark the (expert, token) and (ffn, token) bits.
  for (int token_idx = thread_idx; token_idx < capacity; token_idx += kNumThreads) {
    i64 row[kTopK];
#pragma unroll
    for (int k = 0; k < kTopK; ++k) row[k] = topk_idx[token_idx * kTopK + k];
    const u32 bit = 1u << (token_idx & 31);
#pragma unroll
    for (int slot_idx = 0; slot_idx < kTopK; ++slot_idx) {
      const i64 expert = row[slot_idx];
      if (expert < -1) route_fail(p, kRouteNegative, token_idx, slot_idx);
      if (expert >= num_experts) route_fail(p, kRouteWide, token_idx, slot_idx);
      if (expert < 0) continue;
      if (token_idx >= num_tokens) route_fail(p, kRouteDummy, token_idx, slot_idx);
#pragma unroll
      for (int earlier = 0; earlier < slot_idx; ++earlier)
        if (row[earlier] == expert) route_fail(p, kRouteDuplicate, token_idx, slot_idx);
      const int e = static_cast<int>(expert);
      atomicOr(&bits[e * words + (token_idx >> 5)], bit);
      atomicOr(&bits[(num_experts + e / experts_per_ffn) * words + (token_idx >> 5)], bit);
    }
  }
  // @end pf.source.route_layout
  __syncthreads();

  // Word prefix sums of every bitmap, one warp per bitmap.
  for (int map = warp_idx; map < num_maps; map += kNumWarps) {
    int running = 0;
    for (int base = 0; base < words; base += 32) {
      const int word = base + lane_idx;
      const int count = word < words ? __popc(bits[map * words + word]) : 0;
      const int inclusive = warp_inclusive_sum(count, lane_idx);
      if (word < words) prefix[map * words + word] = running + inclusive - count;
      running += __shfl_sync(kFullMask, inclusive, 31);
    }
  }
  __syncthreads();
  const auto map_total = [&](int map) {
    return static_cast<int>(prefix[map * words + words - 1]) +
           __popc(bits[map * words + words - 1]);
  };

  // @site pf.source.count_put kind=store
  // Count table row on FFN f: [num_tokens, tokens for f, rows of each local expert].
  if (blockIdx.x == 0) {
    const int stride = static_cast<int>(p.counts_stride);
    for (int i = thread_idx; i < num_ffn * stride; i += kNumThreads) {
      const int ffn = i / stride;
      const int column = i % stride;
      int value = 0;
      if (column == 0) value = num_tokens;
      if (column == 1) value = map_total(num_experts + ffn);
      if (column >= 2 && column < 2 + experts_per_ffn)
        value = map_total(ffn * experts_per_ffn + column - 2);
      peer_ptr<i32>(p, num_attention + ffn, p.off_counts)[rank_idx * stride + column] = value;
    }
  }
  // @end pf.source.count_put

  if (blockIdx.x == 0 && thread_idx == 0) *local_ptr<i32>(p.num_tokens) = num_tokens;

  // @site pf.source.row_store kind=store
  const int total_warps = static_cast<int>(gridDim.x) * kNumWarps;
  for (int token_idx = static_cast<int>(blockIdx.x) * kNumWarps + warp_idx;
       token_idx < num_tokens; token_idx += total_warps) {
    const int slot_idx = lane_idx;
    const i64 expert = slot_idx < kTopK ? topk_idx[token_idx * kTopK + slot_idx] : -1;
    const float weight = slot_idx < kTopK ? topk_weights[token_idx * kTopK + slot_idx] : 0.0f;
    const int expert_ffn = expert >= 0 ? static_cast<int>(expert) / experts_per_ffn : -1;
    const u32 ffn_mask = __reduce_or_sync(kFullMask, expert >= 0 ? 1u << expert_ffn : 0u);
    if (lane_idx == 0) local_ptr<u32>(p.token_ffn_mask)[token_idx] = ffn_mask;

    for (u32 pending = ffn_mask; pending != 0; pending &= pending - 1) {
      const int ffn = __ffs(pending) - 1;
      const int ffn_rank = num_attention + ffn;
      const u64 slot = static_cast<u64>(rank_idx) * capacity + token_idx;
      auto* meta = reinterpret_cast<SlotMeta<kTopK>*>(
          peer_ptr<u8>(p, ffn_rank, p.off_slot_meta) + slot * p.slot_meta_bytes);
      if (slot_idx < kTopK) {
        const bool here = expert_ffn == ffn;
        const int e = static_cast<int>(expert);
        meta->local_expert[slot_idx] = here ? e % experts_per_ffn : -1;
        meta->weight[slot_idx] = weight;
        meta->pos[slot_idx] = here ? bitmap_rank(bits + e * words, prefix + e * words, token_idx)
                                   : -1;
      }
      if (lane_idx == 0) {
        const int map = num_experts + ffn;
        meta->token = token_idx;
        meta->collect_pos = bitmap_rank(bits + map * words, prefix + map * words, token_idx);
        meta->epoch = epoch;
      }
      u8* row = peer_ptr<u8>(p, ffn_rank, p.off_slot_rows) + slot * p.row_bytes;
      const auto* src = reinterpret_cast<const int4*>(static_cast<const u8*>(x) +
                                                      static_cast<u64>(token_idx) *
                                                          Shape::kPayloadBytes);
      copy_row<Shape::kPayloadVecs>(reinterpret_cast<int4*>(row), src, lane_idx);
      if constexpr (kFp8) {
        float* scales = reinterpret_cast<float*>(row + Shape::kPayloadBytes);
        for (int s = lane_idx; s < Shape::kNumScales; s += 32)
          scales[s] = x_scales[token_idx * Shape::kNumScales + s];
      }
    }
  }
  // @end pf.source.row_store

  // @site pf.source.done_release kind=release
  __syncthreads();
  if (thread_idx == 0) {
    ptx::fence_acq_rel_sys();
    for (int ffn = 0; ffn < num_ffn; ++ffn)
      ptx::red_add_release_sys(peer_ptr<u64>(p, num_attention + ffn, p.off_done) + rank_idx, 1);
  }
  // @end pf.source.done_release
}

}  // namespace afdep
