// ffn_combine: the FFN side of combine. For every slot received this step, a
// warp reduces the expert outputs of its local top-k slots in slot order
// (fp32, one rounding per multiply and per add), stores the bf16 partial into
// the source's combine slot for this FFN rank, then releases that slot's flag.
//
// It is bound by the latency of its loads: a lane first issues the unmasked
// top-k loads of kUnroll vectors, kChunk slots at a time (predicated, no math
// between them), then sums them, so up to kUnroll * kChunk 16-byte loads are
// in flight per lane. It waits on nothing, so it may run on every SM
// (afdep/residency.py counts it as one CTA).
#pragma once
#include "common/comm.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

template <int kHidden, int kTopK, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    ffn_combine_impl(const Params* __restrict__ params, const bf16* __restrict__ y,
                     const u64 y_rows) {
  constexpr int kNumWarps = kNumThreads / 32;
  constexpr int kVecs = kHidden / 8;  // eight bf16 per 16-byte vector
  // Loads in flight per lane: kUnroll vectors times kChunk top-k slots. At
  // top-8, 16 (64 registers of the 128 a 512-thread CTA per SM may take); a
  // wider top-k keeps fewer, as its rows and weights take registers of their own.
  constexpr int kUnroll = kTopK <= 8 ? 2 : 1;
  constexpr int kChunk = kTopK <= 8 ? kTopK : (kTopK <= 16 ? 8 : 4);
  static_assert(kHidden % 8 == 0, "rows are moved as 16-byte vectors");

  const Params& p = *params;
  const auto [thread_idx, lane_idx, warp_idx] = thread_index();
  const auto [rank_idx, num_attention, capacity, experts_per_ffn] = geometry(p);
  const int ffn_local = rank_idx - num_attention;
  const u64 epoch = step_epoch(p);
  const int total_warps = static_cast<int>(gridDim.x) * kNumWarps;
  const auto* y_vecs = reinterpret_cast<const int4*>(y);

  const int num_slots = num_attention * capacity;
  const u64* slot_epochs = local_ptr<const u64>(p.slot_epoch);
  int slot_id = grid_warp_idx(warp_idx);
  u64 seen = slot_id < num_slots ? slot_epochs[slot_id] : 0;
  for (; slot_id < num_slots; slot_id += total_warps) {
    // The slot's epoch (loaded one slot ahead: the warp's last, usually stale,
    // slot costs no latency at its end), rows and weights are addressed by the
    // slot alone, so they are in flight together: one latency before the rows'
    // loads, not two. A stale slot's rows and weights are read and dropped.
    const int next_id = slot_id + total_warps;
    const u64 next_seen = next_id < num_slots ? slot_epochs[next_id] : 0;
    const bool slot_lane = lane_idx < kTopK;
    const u64 entry = static_cast<u64>(slot_id) * kTopK + lane_idx;
    const int mine = slot_lane ? local_ptr<const i32>(p.slot_rows)[entry] : -1;
    const float w = slot_lane ? local_ptr<const float>(p.slot_weights)[entry] : 0.0f;
    const bool live = seen == epoch;
    seen = next_seen;
    if (!live) continue;
    const int source = slot_id / capacity;
    const int token_idx = slot_id % capacity;
    int rows[kTopK];
    float weights[kTopK];
#pragma unroll
    for (int k = 0; k < kTopK; ++k) {
      rows[k] = __shfl_sync(kFullMask, mine, k);
      weights[k] = __shfl_sync(kFullMask, w, k);
    }
    if (lane_idx == 0)
      for (int k = 0; k < kTopK; ++k)
        AFDEP_ASSERT(rows[k] < static_cast<i64>(y_rows), "combine: expert row %d outside y (%llu rows)",
                     rows[k], y_rows);
    __syncwarp();

    // @site cb.ffn_combine.row_store kind=store
    auto* partial = peer_ptr<int4>(p, source, p.off_combine_rows) +
                    (static_cast<u64>(ffn_local) * capacity + token_idx) * kVecs;
    for (int first = lane_idx; first < kVecs; first += 32 * kUnroll) {
      float acc[kUnroll][8];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[u][i] = 0.f;
#pragma unroll
      for (int k0 = 0; k0 < kTopK; k0 += kChunk) {
        int4 raw[kUnroll][kChunk];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int v = first + 32 * u;
#pragma unroll
          for (int c = 0; c < kChunk; ++c) {
            const int k = k0 + c;
            const bool live = k < kTopK && rows[k] >= 0 && v < kVecs;
            const u64 row = live ? static_cast<u64>(rows[k]) : 0;
            raw[u][c] = ptx::ld_nc_v4_if(live, y_vecs + row * kVecs + (live ? v : 0));
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
          for (int c = 0; c < kChunk; ++c) {
            const int k = k0 + c;
            // A masked slot is skipped, not added as +0: +0 + -0 is +0.
            if (k >= kTopK || rows[k] < 0) continue;
            float values[8];
            unpack_bf16x8(raw[u][c], values);
#pragma unroll
            for (int i = 0; i < 8; ++i)
              acc[u][i] = __fadd_rn(acc[u][i], __fmul_rn(weights[k], values[i]));
          }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (first + 32 * u < kVecs) partial[first + 32 * u] = pack_bf16x8(acc[u]);
    }
    // @end cb.ffn_combine.row_store

    // @site cb.ffn_combine.row_release kind=release producers=warp scope=sys guards=cb.ffn_combine.row_store
    __syncwarp();
    if (lane_idx == 0) {
      u64* flags = peer_ptr<u64>(p, source, p.off_combine_flags);
      ptx::st_release_sys(flags + static_cast<u64>(ffn_local) * capacity + token_idx, epoch);
    }
    // @end cb.ffn_combine.row_release
  }
}

}  // namespace afdep
