// What the dispatch kernels share: the count table, the placement table an
// FFN derives from it, and how a slot is written by a source and read back by
// an FFN. Plain loads and stores only: ordering lives in the kernels' sites.
#pragma once
#include "common/comm.cuh"
#include "common/layout.cuh"
#include "common/params.cuh"
#include "common/ptx.cuh"

namespace afdep {

// ------------------------------------------------------------------ sources
// Route maps: one per expert, then one per FFN rank, of
// bitmap_words(capacity) words each (bit t % 32 of word t / 32: token t routes
// there); `prefix` holds each word's exclusive count. attention_route writes
// every word to global memory; attention_dispatch copies, scans and reads the
// first ceil(num_tokens / 32) words of a map (`used` below) in shared memory:
// a later word holds padding tokens only, which route nowhere.
// A map's words are odd in number (one spare word when ceil(capacity / 32) is
// even), so word w of 32 consecutive maps lies in 32 different banks (the
// scan); afdep/workspace.py sizes the shared memory the same way.
__host__ __device__ __forceinline__ int bitmap_words(int capacity) {
  return ceil_div(capacity, 32) | 1;
}

__device__ __forceinline__ int bitmap_rank(const u32* bits, const u32* prefix, int token_idx) {
  const int word = token_idx >> 5;
  const u32 below = (1u << (token_idx & 31)) - 1u;
  return static_cast<int>(prefix[word]) + __popc(bits[word] & below);
}

__device__ __forceinline__ int bitmap_total(const u32* bits, const u32* prefix, int used) {
  return used == 0 ? 0 : static_cast<int>(prefix[used - 1]) + __popc(bits[used - 1]);
}

// One token's routes (`row`), checked in slot order, into bit token % 32 of
// the warp's word of its experts' maps and its FFN ranks' maps (`own[map]`).
// A padding token (past num_tokens) must hold -1 only. An invalid entry ends
// the kernel in route_fail, naming its kind, token and slot, before this
// slot's bit is set.
template <int kTopK>
__device__ __forceinline__ void mark_token(const Params& p, const i64 (&row)[kTopK],
                                           int num_tokens, u32* own, int token_idx) {
  const int num_experts = static_cast<int>(p.num_experts);
  const int experts_per_ffn = static_cast<int>(p.experts_per_ffn);
  const u32 bit = 1u << (token_idx & 31);
  u32 ffn_mask = 0;
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
    atomicOr(&own[e], bit);
    ffn_mask |= 1u << (e / experts_per_ffn);
  }
  for (u32 pending = ffn_mask; pending != 0; pending &= pending - 1)
    atomicOr(&own[num_experts + __ffs(pending) - 1], bit);
}

// The used words of every map, as attention_route wrote them (`maps`, the
// same layout), into shared memory (block-wide; consecutive threads,
// consecutive words).
template <int kNumThreads>
__device__ __forceinline__ void load_maps(const u32* maps, u32* bits, int num_maps, int words,
                                          int used, int thread_idx) {
  for (int i = thread_idx; i < num_maps * used; i += kNumThreads) {
    const int map = i / used, word = i % used;
    bits[map * words + word] = maps[map * words + word];
  }
}

// Word prefix sums of every bitmap's used words, one thread per bitmap, words
// in order with no shuffle: word w of the 32 lanes' maps (consecutive) lies in
// 32 banks, a map's words being odd in number.
template <int kNumThreads>
__device__ __forceinline__ void scan_bitmaps(const u32* bits, u32* prefix, int maps, int words,
                                             int used, int thread_idx) {
  constexpr int kBatch = 8;  // loads in flight before their sums
  for (int map = thread_idx; map < maps; map += kNumThreads) {
    const u32* map_bits = bits + map * words;
    u32* map_prefix = prefix + map * words;
    u32 running = 0;
    for (int step = 0; step < used; step += kBatch) {
      u32 counts[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        counts[i] = step + i < used ? __popc(map_bits[step + i]) : 0u;
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        if (step + i < used) map_prefix[step + i] = running;
        running += counts[i];
      }
    }
  }
}

// This source's count table row on every FFN rank (block-wide).
template <int kNumThreads>
__device__ __forceinline__ void put_counts(const Params& p, const u32* bits, const u32* prefix,
                                           int words, int used, int num_tokens, int protocol,
                                           int thread_idx) {
  const int stride = static_cast<int>(p.counts_stride);
  const int experts_per_ffn = static_cast<int>(p.experts_per_ffn);
  const int num_experts = static_cast<int>(p.num_experts);
  for (int i = thread_idx; i < static_cast<int>(p.num_ffn) * stride; i += kNumThreads) {
    const int ffn = i / stride, column = i % stride;
    int value = 0;
    if (column == kCountTokens) value = num_tokens;
    if (column == kCountRouted) {
      const int map = num_experts + ffn;
      value = bitmap_total(bits + map * words, prefix + map * words, used);
    }
    if (column == kCountProtocol) value = protocol;
    if (column >= kCountHeader && column < kCountHeader + experts_per_ffn) {
      const int e = ffn * experts_per_ffn + column - kCountHeader;
      value = bitmap_total(bits + e * words, prefix + e * words, used);
    }
    peer_ptr<i32>(p, static_cast<int>(p.num_attention) + ffn, p.off_counts)[p.rank * stride + column] =
        value;
  }
}

// The slot's metadata: lane k < kTopK writes slot k's entry, lane 0 the rest.
template <int kTopK>
__device__ __forceinline__ void write_slot_meta(SlotMeta<kTopK>* meta, int lane_idx, int token_idx,
                                                int collect_pos, int local_expert, float weight,
                                                int pos, u64 epoch) {
  if (lane_idx < kTopK) {
    meta->local_expert[lane_idx] = local_expert;
    meta->weight[lane_idx] = weight;
    meta->pos[lane_idx] = pos;
  }
  if (lane_idx == 0) {
    meta->token = token_idx;
    meta->collect_pos = collect_pos;
    meta->epoch = epoch;
  }
}

// One token row (and its fp8 scales) into a slot row: payload, then scales.
template <int kHidden, bool kFp8>
__device__ __forceinline__ void write_slot_row(u8* row, const void* x, const float* x_scales,
                                               int token_idx, int lane_idx) {
  using Shape = RowShape<kHidden, kFp8>;
  const auto* src = reinterpret_cast<const int4*>(static_cast<const u8*>(x) +
                                                  static_cast<u64>(token_idx) * Shape::kPayloadBytes);
  copy_row<Shape::kPayloadVecs>(reinterpret_cast<int4*>(row), src, lane_idx);
  if constexpr (kFp8) {
    float* scales = reinterpret_cast<float*>(row + Shape::kPayloadBytes);
    for (int s = lane_idx; s < Shape::kNumScales; s += 32)
      scales[s] = x_scales[token_idx * Shape::kNumScales + s];
  }
}

// ARM=attention: the token row straight into the FFN's output rows (`dst_rows`
// known to every lane, -1 for none), payload and scales in their own regions.
template <int kHidden, bool kFp8, int kDestinations>
__device__ __forceinline__ void write_direct_rows(u8* out_x, float* out_scales, const void* x,
                                                  const float* x_scales, int token_idx,
                                                  const int (&dst_rows)[kDestinations],
                                                  int lane_idx) {
  using Shape = RowShape<kHidden, kFp8>;
  const auto* src = reinterpret_cast<const int4*>(static_cast<const u8*>(x) +
                                                  static_cast<u64>(token_idx) * Shape::kPayloadBytes);
#pragma unroll
  for (int d = 0; d < kDestinations; ++d) {
    if (dst_rows[d] < 0) continue;
    copy_row<Shape::kPayloadVecs>(
        reinterpret_cast<int4*>(out_x + static_cast<u64>(dst_rows[d]) * Shape::kPayloadBytes), src,
        lane_idx);
    if constexpr (kFp8)
      for (int s = lane_idx; s < Shape::kNumScales; s += 32)
        out_scales[static_cast<u64>(dst_rows[d]) * Shape::kNumScales + s] =
            x_scales[token_idx * Shape::kNumScales + s];
  }
}

// ------------------------------------------------------------------ FFN ranks
// The placement table of one step, in i32: each source's tokens, the collect
// bases [A + 1], the expert offsets [E_f + 1] and the per-(expert, source)
// bases [E_f * A], expert-major.
struct Placement {
  i32* tokens;
  i32* collect_bases;
  i32* offsets;
  i32* bases;
};

__host__ __device__ constexpr int placement_ints(int num_attention, int experts_per_ffn) {
  return num_attention + (num_attention + 1) + (experts_per_ffn + 1) +
         experts_per_ffn * num_attention;
}

__device__ __forceinline__ Placement placement_at(i32* base, int num_attention,
                                                  int experts_per_ffn) {
  Placement t;
  t.tokens = base;
  t.collect_bases = t.tokens + num_attention;
  t.offsets = t.collect_bases + num_attention + 1;
  t.bases = t.offsets + experts_per_ffn + 1;
  return t;
}

// Build the placement table from this rank's count table (block-wide, one
// block per table; every source's row must be complete). `totals` is E_f ints
// of scratch. Checks each source dispatched with `protocol`. Each count is
// read once: it waits in the table's own entry (`bases`, `collect_bases`)
// until the prefix over it replaces it, so no phase reads the count table
// again after a barrier.
template <int kNumThreads>
__device__ __forceinline__ void compute_placement(const Params& p, const Placement& out,
                                                  i32* totals, int protocol, int thread_idx) {
  const int num_attention = static_cast<int>(p.num_attention);
  const int experts_per_ffn = static_cast<int>(p.experts_per_ffn);
  const int stride = static_cast<int>(p.counts_stride);
  const i32* counts = peer_ptr<const i32>(p, static_cast<int>(p.rank), p.off_counts);
  for (int j = thread_idx; j < experts_per_ffn; j += kNumThreads) {
    int total = 0;
    for (int source = 0; source < num_attention; ++source) {
      const int count = ptx::ld_cg_s32(counts + source * stride + kCountHeader + j);
      out.bases[j * num_attention + source] = count;
      total += count;
    }
    totals[j] = total;
  }
  if (thread_idx < num_attention) {
    const int seen = ptx::ld_cg_s32(counts + thread_idx * stride + kCountProtocol);
    AFDEP_ASSERT(seen == protocol, "rank %d: source %d dispatched with protocol %d, this rank "
                 "expects %d (ranks disagree on the bucket or the configuration)",
                 static_cast<int>(p.rank), thread_idx, seen, protocol);
    out.tokens[thread_idx] = ptx::ld_cg_s32(counts + thread_idx * stride + kCountTokens);
    out.collect_bases[thread_idx + 1] = ptx::ld_cg_s32(counts + thread_idx * stride + kCountRouted);
  }
  __syncthreads();
  if (thread_idx < 32) warp_exclusive_scan(totals, out.offsets, experts_per_ffn, thread_idx);
  if (thread_idx == 32) {
    out.collect_bases[0] = 0;
    for (int source = 0; source < num_attention; ++source)
      out.collect_bases[source + 1] += out.collect_bases[source];
  }
  __syncthreads();
  for (int j = thread_idx; j < experts_per_ffn; j += kNumThreads) {
    int running = out.offsets[j];
    for (int source = 0; source < num_attention; ++source) {
      const int count = out.bases[j * num_attention + source];
      out.bases[j * num_attention + source] = running;
      running += count;
    }
  }
  __syncthreads();
}

// One received slot's metadata as a lane holds it: lane k < kTopK its top-k
// entry k. Every field is loaded in one batch, so a slot costs one load
// latency before its rows, not one per field that decides the next.
struct SlotFields {
  u64 epoch;
  int token;
  int collect_pos;
  int local_expert;  // -1: lane k's route is not to this FFN (or lane k >= kTopK)
  float weight;
  int pos;
};

template <int kTopK>
__device__ __forceinline__ SlotFields load_slot_fields(const SlotMeta<kTopK>* meta, int lane_idx) {
  SlotFields fields{ptx::ld_cg_u64(&meta->epoch), ptx::ld_cg_s32(&meta->token),
                    ptx::ld_cg_s32(&meta->collect_pos), -1, 0.0f, 0};
  if (lane_idx < kTopK) {
    fields.local_expert = ptx::ld_cg_s32(&meta->local_expert[lane_idx]);
    fields.weight = ptx::ld_cg_f32(&meta->weight[lane_idx]);
    fields.pos = ptx::ld_cg_s32(&meta->pos[lane_idx]);  // read whether or not it is used
  }
  return fields;
}

// Read one received slot back (warp-wide) from its fields: with `record`, its
// metadata into the outputs and into the per-slot arrays combine uses; with
// `copy` (and kCopyRows), its row into every expert row it names, or once into
// the collect view. A slot whose metadata is not this step's was read before
// it landed.
template <int kHidden, int kTopK, bool kFp8, bool kCollectView, bool kCopyRows>
__device__ __forceinline__ void receive_slot(const Params& p, const Placement& placement,
                                             int source, const SlotFields& fields,
                                             const u8* row, u64 epoch, int lane_idx,
                                             bool record = true, bool copy = true) {
  using Shape = RowShape<kHidden, kFp8>;
  const int num_attention = static_cast<int>(p.num_attention);
  if (lane_idx == 0)
    AFDEP_ASSERT(fields.epoch == epoch, "rank %d: a slot of source %d holds step %llu's metadata, "
                 "not step %llu's (read before it landed)", static_cast<int>(p.rank), source,
                 static_cast<unsigned long long>(fields.epoch),
                 static_cast<unsigned long long>(epoch));
  const int token_idx = fields.token;
  const int slot_idx = lane_idx;
  const int local_expert = fields.local_expert;
  const float weight = fields.weight;
  const int expert_row =
      local_expert >= 0 ? placement.bases[local_expert * num_attention + source] + fields.pos : -1;
  const int collect_row = placement.collect_bases[source] + fields.collect_pos;
  const u64 slot = static_cast<u64>(source) * p.capacity + token_idx;
  if (record && slot_idx < kTopK) {
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
  if (record && lane_idx == 0) {
    local_ptr<u64>(p.slot_epoch)[slot] = epoch;
    if constexpr (kCollectView) {
      local_ptr<i32>(p.col_src_rank)[collect_row] = source;
      local_ptr<i32>(p.col_src_token)[collect_row] = token_idx;
    }
  }
  if (!kCopyRows || !copy) return;

  // Every destination row of this slot, known to all lanes.
  constexpr int kNumDestinations = kCollectView ? 1 : kTopK;
  int destinations[kNumDestinations];
  if constexpr (kCollectView) {
    destinations[0] = collect_row;
  } else {
#pragma unroll
    for (int k = 0; k < kTopK; ++k) destinations[k] = __shfl_sync(kFullMask, expert_row, k);
  }
  u8* out_rows = reinterpret_cast<u8*>(kCollectView ? p.col_x : p.out_x);
  float* out_scales = reinterpret_cast<float*>(kCollectView ? p.col_scales : p.out_scales);
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

}  // namespace afdep
