// attention_combine: the attention side of combine. For a chunk of a warp's
// consecutive tokens, lane i waits for the flag of every FFN rank the chunk's i-th token
// was sent to; the warp then adds each token's bf16 partials in FFN-rank
// order in fp32 and rounds once to bf16.
//
// It is bound by the latency of its loads on its 24 SMs: a lane issues all
// kBatch of its vectors of a partial before it adds them, so one latency per
// FFN rank and batch, not one per vector; the chunk's flags cost one latency
// together. Two neighbouring tokens that each have at most one partial (every
// token at one FFN rank) are read together, so twice the bytes are in flight
// for one latency.
#pragma once
#include "common/comm.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

// A partial row's vectors v = (base + i) * 32 + lane_idx, i < kBatch, loaded
// before any is used (zeros past the row, or for no partial at all).
template <int kVecs, int kBatch>
__device__ __forceinline__ void load_partial(int4 (&raw)[kBatch], const int4* partial, int base,
                                             int lane_idx) {
#pragma unroll
  for (int i = 0; i < kBatch; ++i) {
    const int v = (base + i) * 32 + lane_idx;
    raw[i] = partial != nullptr && v < kVecs ? ptx::ld_cg_v4(partial + v) : make_int4(0, 0, 0, 0);
  }
}

// out = bf16(+0.0f + partial) for each vector of `raw`: the reduction of a
// token with one partial (or none: +0), rounded as the general path rounds.
template <int kVecs, int kBatch>
__device__ __forceinline__ void store_single(int4* out_row, const int4 (&raw)[kBatch], int base,
                                             int lane_idx) {
#pragma unroll
  for (int i = 0; i < kBatch; ++i) {
    const int v = (base + i) * 32 + lane_idx;
    float values[8];
    unpack_bf16x8(raw[i], values);
#pragma unroll
    for (int j = 0; j < 8; ++j) values[j] = __fadd_rn(0.f, values[j]);
    if (v < kVecs) out_row[v] = pack_bf16x8(values);
  }
}

// One token: acc = +0.0f, then + each FFN rank's partial in rank order.
template <int kVecs, int kPerLane, int kBatch>
__device__ __forceinline__ void reduce_token(int4* out_row, const int4* partials, u32 ffn_mask,
                                             int capacity, int token_idx, int lane_idx) {
  for (int base = 0; base < kPerLane; base += kBatch) {
    float acc[kBatch][8];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    for (u32 pending = ffn_mask; pending != 0; pending &= pending - 1) {
      int4 raw[kBatch];
      load_partial<kVecs>(
          raw, partials + (static_cast<u64>(__ffs(pending) - 1) * capacity + token_idx) * kVecs,
          base, lane_idx);
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        float values[8];
        unpack_bf16x8(raw[i], values);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = __fadd_rn(acc[i][j], values[j]);
      }
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int v = (base + i) * 32 + lane_idx;
      if (v < kVecs) out_row[v] = pack_bf16x8(acc[i]);
    }
  }
}

// Two tokens with at most one partial each: both loaded, then both stored.
template <int kVecs, int kPerLane, int kBatch>
__device__ __forceinline__ void copy_single_pair(int4* out_rows, const int4* partials,
                                                 const u32 (&ffn_masks)[2], int capacity,
                                                 int token_idx, int lane_idx) {
  const int4* partial[2];
#pragma unroll
  for (int t = 0; t < 2; ++t)
    partial[t] = ffn_masks[t] == 0 ? nullptr
                                   : partials + (static_cast<u64>(__ffs(ffn_masks[t]) - 1) *
                                                     capacity + token_idx + t) * kVecs;
  for (int base = 0; base < kPerLane; base += kBatch) {
    int4 raw[2][kBatch];
#pragma unroll
    for (int t = 0; t < 2; ++t) load_partial<kVecs>(raw[t], partial[t], base, lane_idx);
#pragma unroll
    for (int t = 0; t < 2; ++t)
      store_single<kVecs>(out_rows + static_cast<u64>(token_idx + t) * kVecs, raw[t], base,
                          lane_idx);
  }
}

template <int kHidden, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    attention_combine_impl(const Params* __restrict__ params, bf16* __restrict__ out) {
  constexpr int kNumWarps = kNumThreads / 32;
  constexpr int kVecs = kHidden / 8;
  constexpr int kPerLane = (kVecs + 31) / 32;
  constexpr int kBatch = kPerLane < 8 ? kPerLane : 8;  // a pair's 2 x 8 vectors: 64 registers
  constexpr int kWaitLanes = 8;  // tokens whose flags a warp waits for at once
  static_assert(kHidden % 8 == 0, "rows are moved as 16-byte vectors");

  const Params& p = *params;
  const auto [thread_idx, lane_idx, warp_idx] = thread_index();
  const auto [rank_idx, num_attention, capacity, experts_per_ffn] = geometry(p);
  const int num_tokens = *local_ptr<const i32>(p.num_tokens);
  const u64 epoch = step_epoch(p);
  const int total_warps = static_cast<int>(gridDim.x) * kNumWarps;
  const u64* flags = peer_ptr<const u64>(p, rank_idx, p.off_combine_flags);
  const auto* partials = peer_ptr<const int4>(p, rank_idx, p.off_combine_rows);
  auto* out_vecs = reinterpret_cast<int4*>(out);

  // A warp takes chunks of `run` consecutive tokens (chunk grid_warp_idx, then
  // every total_warps-th): lane i < run waits for the flags of the chunk's i-th
  // token, so a chunk's flags cost one latency together, not one per token
  // before its partials. `run` splits the step's tokens per warp into the
  // fewest chunks of at most kWaitLanes: a short step keeps one token per warp,
  // and a chunk's tokens are neighbours, which ffn_combine finishes together.
  // The masks (this rank's own, written by its dispatch) of the next chunk
  // are loaded while this one is reduced. The warp reads a chunk's masks from
  // shared memory, which the wait's __syncwarp orders, not by a shuffle: a
  // collective right after the wait would sync the warp on its own and hide a
  // wait without its __syncwarp. Two buffers: a chunk's masks are written
  // once every lane has passed the previous chunk's wait, so past its reduce
  // two chunks back.
  __shared__ u32 chunk_masks[2][kNumWarps][kWaitLanes];
  const u32* token_ffn_masks = local_ptr<const u32>(p.token_ffn_mask);
  const int per_warp = max(1, ceil_div(num_tokens, total_warps));
  const int run = ceil_div(per_warp, ceil_div(per_warp, kWaitLanes));
  auto lane_token_of = [&, lane_idx = lane_idx](int chunk) { return chunk * run + lane_idx; };
  auto lane_mask_of = [&, lane_idx = lane_idx](int chunk) {
    const int token = lane_token_of(chunk);
    return lane_idx < run && token < num_tokens ? token_ffn_masks[token] : 0u;
  };
  int chunk = grid_warp_idx(warp_idx);
  u32 next_mask = lane_mask_of(chunk);
  for (int parity = 0; chunk * run < num_tokens; chunk += total_warps, parity ^= 1) {
    const u32 lane_mask = next_mask;  // lane i < run: the chunk's i-th token's
    const int lane_token = lane_token_of(chunk);
    next_mask = lane_mask_of(chunk + total_warps);
    u32* masks = chunk_masks[parity][warp_idx];
    if (lane_idx < run) masks[lane_idx] = lane_mask;

    // @site cb.attention_combine.row_wait kind=wait consumers=warp scope=sys guards=cb.ffn_combine.row_store
    for (u32 pending = lane_mask; pending != 0; pending &= pending - 1)
      wait_until(flags + static_cast<u64>(__ffs(pending) - 1) * capacity + lane_token, epoch,
                 "cb.attention_combine.row_wait", p);
    __syncwarp();
    // @end cb.attention_combine.row_wait

    for (int b = 0; b < run;) {
      const int token_idx = chunk * run + b;
      if (token_idx >= num_tokens) break;  // warp-uniform
      const u32 ffn_masks[2] = {masks[b], b + 1 < run ? masks[b + 1] : ~0u};
      const bool pair = token_idx + 1 < num_tokens && __popc(ffn_masks[0]) <= 1 &&
                        __popc(ffn_masks[1]) <= 1;

      // @site cb.attention_combine.reduce kind=compute
      if (pair)
        copy_single_pair<kVecs, kPerLane, kBatch>(out_vecs, partials, ffn_masks, capacity,
                                                  token_idx, lane_idx);
      else
        reduce_token<kVecs, kPerLane, kBatch>(out_vecs + static_cast<u64>(token_idx) * kVecs,
                                              partials, ffn_masks[0], capacity, token_idx,
                                              lane_idx);
      b += pair ? 2 : 1;
      // @end cb.attention_combine.reduce
    }
  }
}

}  // namespace afdep
