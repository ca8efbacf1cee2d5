// attention_combine: the attention side of combine. For a chunk of a warp's
// consecutive tokens, lane i waits for the flag of every FFN rank the chunk's i-th token
// was sent to; the warp then adds each token's bf16 partials in FFN-rank
// order in fp32 and rounds once to bf16.
//
// Like ffn_combine it is bound by the latency of its loads: per FFN rank a
// lane issues all kBatch of its vectors of the partial before it adds them,
// so one latency per FFN rank and batch, not one per vector; the chunk's
// flags cost one latency together.
#pragma once
#include "common/comm.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

template <int kHidden, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    attention_combine_impl(const Params* __restrict__ params, bf16* __restrict__ out) {
  constexpr int kNumWarps = kNumThreads / 32;
  constexpr int kVecs = kHidden / 8;
  constexpr int kPerLane = (kVecs + 31) / 32;
  constexpr int kBatch = kPerLane < 8 ? kPerLane : 8;  // 8 vectors: 96 of the 128 registers
  constexpr int kWaitLanes = 8;  // tokens whose flags a warp waits for at once
  static_assert(kHidden % 8 == 0, "rows are moved as 16-byte vectors");

  const Params& p = *params;
  const int thread_idx = static_cast<int>(threadIdx.x);
  const int lane_idx = thread_idx % 32;
  const int warp_idx = thread_idx / 32;
  const int rank_idx = static_cast<int>(p.rank);
  const int capacity = static_cast<int>(p.capacity);
  const int num_tokens = *local_ptr<const i32>(p.num_tokens);
  const u64 epoch = *local_ptr<const u64>(p.epoch);
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
  auto lane_token_of = [&](int chunk) { return chunk * run + lane_idx; };
  auto lane_mask_of = [&](int chunk) {
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

    for (int b = 0; b < run; ++b) {
      const int token_idx = chunk * run + b;
      if (token_idx >= num_tokens) break;  // warp-uniform
      const u32 ffn_mask = masks[b];

      // @site cb.attention_combine.reduce kind=compute
      for (int base = 0; base < kPerLane; base += kBatch) {
        float acc[kBatch][8];
#pragma unroll
        for (int i = 0; i < kBatch; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
        for (u32 pending = ffn_mask; pending != 0; pending &= pending - 1) {
          const int4* partial =
              partials + (static_cast<u64>(__ffs(pending) - 1) * capacity + token_idx) * kVecs;
          int4 raw[kBatch];
#pragma unroll
          for (int i = 0; i < kBatch; ++i) {  // loads first, so they overlap
            const int v = (base + i) * 32 + lane_idx;
            raw[i] = v < kVecs ? ptx::ld_cg_v4(partial + v) : make_int4(0, 0, 0, 0);
          }
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
          if (v < kVecs) out_vecs[static_cast<u64>(token_idx) * kVecs + v] = pack_bf16x8(acc[i]);
        }
      }
      // @end cb.attention_combine.reduce
    }
  }
}

}  // namespace afdep
