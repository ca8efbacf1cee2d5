// copy_epilogue: the FFN side of payload-first dispatch.
//
// Waits until every source has released all of its rows, turns the count
// table into expert offsets and per-source bases, then copies each received
// slot into the expert-major layout (or, with the collect view, once into the
// collect layout) and records, per slot, the rows and weights combine needs.
#pragma once
#include "common/comm.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

// Shared memory, in i32: counts [A * stride], expert totals [E_f], offsets
// [E_f + 1], bases [E_f * A] (expert-major), collect bases [A + 1].
__host__ __device__ constexpr int copy_epilogue_smem_ints(int num_attention, int stride,
                                                          int experts_per_ffn) {
  return num_attention * stride + experts_per_ffn + (experts_per_ffn + 1) +
         experts_per_ffn * num_attention + (num_attention + 1);
}

template <int kHidden, int kTopK, bool kFp8, bool kCollectView, int kNumThreads>
__global__ void __launch_bounds__(kNumThreads, 1)
    copy_epilogue_impl(const Params* __restrict__ params) {
  using Shape = RowShape<kHidden, kFp8>;
  constexpr int kNumWarps = kNumThreads / 32;
  extern __shared__ i32 smem_i32[];

  const Params& p = *params;
  const int thread_idx = static_cast<int>(threadIdx.x);
  const int lane_idx = thread_idx % 32;
  const int warp_idx = thread_idx / 32;
  const int rank_idx = static_cast<int>(p.rank);
  const int num_attention = static_cast<int>(p.num_attention);
  const int capacity = static_cast<int>(p.capacity);
  const int experts_per_ffn = static_cast<int>(p.experts_per_ffn);
  const int stride = static_cast<int>(p.counts_stride);
  const u64 epoch = *local_ptr<const u64>(p.epoch);

  i32* counts = smem_i32;
  i32* totals = counts + num_attention * stride;
  i32* offsets = totals + experts_per_ffn;
  i32* bases = offsets + experts_per_ffn + 1;
  i32* collect_bases = bases + experts_per_ffn * num_attention;

  // @site pf.epilogue.done_wait kind=wait guards=pf.source.row_store
  if (thread_idx == 0) {
    const u64* done = peer_ptr<const u64>(p, rank_idx, p.off_done);
    for (int source = 0; source < num_attention; ++source)
      wait_until(done + source, epoch * p.source_ctas, "pf.epilogue.done_wait", p);
  }
  __syncthreads();
  // @end pf.epilogue.done_wait

  const i32* count_table = peer_ptr<const i32>(p, rank_idx, p.off_counts);
  for (int i = thread_idx; i < num_attention * stride; i += kNumThreads)
    counts[i] = ptx::ld_cg_s32(count_table + i);
  __syncthreads();
  for (int j = thread_idx; j < experts_per_ffn; j += kNumThreads) {
    int total = 0;
    for (int source = 0; source < num_attention; ++source) total += counts[source * stride + 2 + j];
    totals[j] = total;
  }
  __syncthreads();
  if (warp_idx == 0) warp_exclusive_scan(totals, offsets, experts_per_ffn, lane_idx);
  if (thread_idx == 32) {
    int running = 0;
    for (int source = 0; source < num_attention; ++source) {
      collect_bases[source] = running;
      running += counts[source * stride + 1];
    }
    collect_bases[num_attention] = running;
  }
  __syncthreads();
  for (int j = thread_idx; j < experts_per_ffn; j += kNumThreads) {
    int running = offsets[j];
    for (int source = 0; source < num_attention; ++source) {
      bases[j * num_attention + source] = running;
      running += counts[source * stride + 2 + j];
    }
  }
  if (blockIdx.x == 0)
    for (int j = thread_idx; j <= experts_per_ffn; j += kNumThreads)
      local_ptr<i32>(p.out_expert_offsets)[j] = offsets[j];
  __syncthreads();

  // @site pf.epilogue.copy kind=store
  const int total_warps = static_cast<int>(gridDim.x) * kNumWarps;
  for (int source = 0; source < num_attention; ++source) {
    const int source_tokens = counts[source * stride];
    for (int token_idx = static_cast<int>(blockIdx.x) * kNumWarps + warp_idx;
         token_idx < source_tokens; token_idx += total_warps) {
      const u64 slot = static_cast<u64>(source) * capacity + token_idx;
      const auto* meta = reinterpret_cast<const SlotMeta<kTopK>*>(
          peer_ptr<const u8>(p, rank_idx, p.off_slot_meta) + slot * p.slot_meta_bytes);
      if (ptx::ld_cg_u64(&meta->epoch) != epoch) continue;  // not routed here this step

      const int slot_idx = lane_idx;
      int local_expert = -1, expert_row = -1;
      float weight = 0.0f;
      if (slot_idx < kTopK) {
        local_expert = ptx::ld_cg_s32(&meta->local_expert[slot_idx]);
        weight = ptx::ld_cg_f32(&meta->weight[slot_idx]);
        if (local_expert >= 0)
          expert_row = bases[local_expert * num_attention + source] +
                       ptx::ld_cg_s32(&meta->pos[slot_idx]);
      }
      const int collect_row = collect_bases[source] + ptx::ld_cg_s32(&meta->collect_pos);
      if (slot_idx < kTopK) {
        local_ptr<i32>(p.slot_rows)[slot * kTopK + slot_idx] = expert_row;
        local_ptr<float>(p.slot_weights)[slot * kTopK + slot_idx] = weight;
        if (expert_row >= 0) {
          local_ptr<i32>(p.out_src_rank)[expert_row] = source;
          local_ptr<i32>(p.out_src_token)[expert_row] = token_idx;
          local_ptr<i32>(p.out_topk_slot)[expert_row] = slot_idx;
          local_ptr<float>(p.out_weight)[expert_row] = weight;
          local_ptr<i32>(p.out_collect_row)[expert_row] = collect_row;
        }
        if constexpr (kCollectView) {
          local_ptr<i32>(p.col_local_experts)[collect_row * kTopK + slot_idx] = local_expert;
          local_ptr<float>(p.col_weights)[collect_row * kTopK + slot_idx] =
              local_expert >= 0 ? weight : 0.0f;
          local_ptr<i32>(p.col_expert_rows)[collect_row * kTopK + slot_idx] = expert_row;
        }
      }
      if (lane_idx == 0) {
        local_ptr<u64>(p.slot_epoch)[slot] = epoch;
        if constexpr (kCollectView) {
          local_ptr<i32>(p.col_src_rank)[collect_row] = source;
          local_ptr<i32>(p.col_src_token)[collect_row] = token_idx;
        }
      }

      // Every destination row of this slot, known to all lanes.
      int destinations[kCollectView ? 1 : kTopK];
      if constexpr (kCollectView) {
        destinations[0] = collect_row;
      } else {
#pragma unroll
        for (int k = 0; k < kTopK; ++k) destinations[k] = __shfl_sync(kFullMask, expert_row, k);
      }
      constexpr int kNumDestinations = kCollectView ? 1 : kTopK;
      u8* out_rows = reinterpret_cast<u8*>(kCollectView ? p.col_x : p.out_x);
      float* out_scales = reinterpret_cast<float*>(kCollectView ? p.col_scales : p.out_scales);
      const u8* row = peer_ptr<const u8>(p, rank_idx, p.off_slot_rows) + slot * p.row_bytes;
      constexpr int kPerLane = ceil_div(Shape::kPayloadVecs, 32);
      constexpr int kBatch = kPerLane < 8 ? kPerLane : 8;
      const auto* row_vecs = reinterpret_cast<const int4*>(row);
#pragma unroll
      for (int base = 0; base < kPerLane; base += kBatch) {
        int4 values[kBatch];  // loads first, so they overlap
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
          const int v = (base + i) * 32 + lane_idx;
          if (v < Shape::kPayloadVecs) values[i] = ptx::ld_cg_v4(row_vecs + v);
        }
#pragma unroll
        for (int d = 0; d < kNumDestinations; ++d) {
          if (destinations[d] < 0) continue;
          auto* out = reinterpret_cast<int4*>(out_rows + static_cast<u64>(destinations[d]) *
                                                             Shape::kPayloadBytes);
#pragma unroll
          for (int i = 0; i < kBatch; ++i) {
            const int v = (base + i) * 32 + lane_idx;
            if (v < Shape::kPayloadVecs) out[v] = values[i];
          }
        }
      }
      if constexpr (kFp8) {
        const auto* scales = reinterpret_cast<const float*>(row + Shape::kPayloadBytes);
        for (int s = lane_idx; s < Shape::kNumScales; s += 32) {
          const float scale = ptx::ld_cg_f32(scales + s);
#pragma unroll
          for (int d = 0; d < kNumDestinations; ++d)
            if (destinations[d] >= 0)
              out_scales[static_cast<u64>(destinations[d]) * Shape::kNumScales + s] = scale;
        }
      }
    }
  }
  // @end pf.epilogue.copy
}

}  // namespace afdep
