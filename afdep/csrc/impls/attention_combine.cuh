// attention_combine: the attention side of combine. Per token, lane 0 waits for
// the flag of every FFN rank the token was sent to; the warp then adds their
// bf16 partials in FFN-rank order in fp32 and rounds once to bf16.
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

  for (int token_idx = static_cast<int>(blockIdx.x) * kNumWarps + warp_idx;
       token_idx < num_tokens; token_idx += total_warps) {
    const u32 ffn_mask = local_ptr<const u32>(p.token_ffn_mask)[token_idx];

    // @site cb.attention_combine.row_wait kind=wait consumers=warp scope=sys guards=cb.ffn_combine.row_store
    if (lane_idx == 0)
      for (u32 pending = ffn_mask; pending != 0; pending &= pending - 1)
        wait_until(flags + static_cast<u64>(__ffs(pending) - 1) * capacity + token_idx, epoch,
                   "cb.attention_combine.row_wait", p);
    __syncwarp();
    // @end cb.attention_combine.row_wait

    // @site cb.attention_combine.reduce kind=compute
#pragma unroll 2
    for (int v = lane_idx; v < kVecs; v += 32) {
      float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      for (u32 pending = ffn_mask; pending != 0; pending &= pending - 1) {
        const int ffn = __ffs(pending) - 1;
        float values[8];
        unpack_bf16x8(
            ptx::ld_cg_v4(partials + (static_cast<u64>(ffn) * capacity + token_idx) * kVecs + v),
            values);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = __fadd_rn(acc[i], values[i]);
      }
      out_vecs[static_cast<u64>(token_idx) * kVecs + v] = pack_bf16x8(acc);
    }
    // @end cb.attention_combine.reduce
  }
}

}  // namespace afdep
