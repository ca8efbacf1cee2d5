// attention_route: the attention (source) side's step begins here: its epoch
// advances (thread 0 of CTA 0: attention_dispatch, next on the stream, reads
// it; one launch, not an increment and a kernel), and its routes are checked
// and laid out once, before attention_dispatch sends anything.
//
// A warp takes one word of the route maps: 32 consecutive tokens, lane t the
// t-th, padding tokens included, so every entry of [capacity x kTopK] is
// checked by exactly one lane (mark_token: slot order, the device's kinds).
// Its bits go to the warp's own copy of the word of every map in shared
// memory, then out to `maps` (map-major, bitmap_words(capacity) words a map:
// one per expert, then one per FFN rank). No two warps share a word: no
// global atomic and no grid-wide wait. attention_dispatch, launched after it
// on the same stream, reads the used words back. An invalid route traps here
// (route_fail), so nothing of an invalid step is ever sent.
#pragma once
#include "common/comm.cuh"
#include "common/dispatch.cuh"
#include "common/params.cuh"

namespace afdep {

template <int kTopK, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    attention_route_impl(const Params* __restrict__ params, const i64* __restrict__ topk_idx,
                         const i32* __restrict__ num_tokens_ptr, u32* __restrict__ maps) {
  constexpr int kNumWarps = kNumThreads / 32;
  extern __shared__ u32 smem[];

  const Params& p = *params;
  const auto [thread_idx, lane_idx, warp_idx] = thread_index();
  const auto [rank_idx, num_attention, capacity, experts_per_ffn] = geometry(p);
  const int num_maps = static_cast<int>(p.num_experts + p.num_ffn);
  const int words = bitmap_words(capacity);
  if (blockIdx.x == 0 && thread_idx == 0) ++*local_ptr<u64>(p.epoch);
  const int num_tokens = *num_tokens_ptr;
  if (num_tokens < 0 || num_tokens > capacity) {
    if (blockIdx.x == 0 && thread_idx == 0)
      AFDEP_ASSERT(false, "rank %d: num_tokens=%d outside [0, %d]", rank_idx, num_tokens,
                   capacity);
    return;
  }
  const int word = static_cast<int>(blockIdx.x) * kNumWarps + warp_idx;
  if (word >= ceil_div(capacity, 32)) return;  // warp-uniform; no block-wide wait follows
  u32* own = smem + warp_idx * num_maps;       // this warp's word of every map
  for (int map = lane_idx; map < num_maps; map += 32) own[map] = 0;
  __syncwarp();

  // @site dispatch.attention_route.route_layout kind=compute
  const int token_idx = word * 32 + lane_idx;
  if (token_idx < capacity) {
    i64 row[kTopK];
#pragma unroll
    for (int k = 0; k < kTopK; ++k) row[k] = __ldg(topk_idx + token_idx * kTopK + k);
    mark_token<kTopK>(p, row, num_tokens, own, token_idx);
  }
  __syncwarp();
  for (int map = lane_idx; map < num_maps; map += 32) maps[map * words + word] = own[map];
  // @end dispatch.attention_route.route_layout
}

}  // namespace afdep
