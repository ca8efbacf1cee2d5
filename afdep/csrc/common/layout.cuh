// Slot metadata and the small warp helpers the kernels share.
#pragma once
#include "common/params.cuh"
#include "common/ptx.cuh"
#include "common/types.cuh"

namespace afdep {

constexpr unsigned kFullMask = 0xffffffffu;

// Protocols, as recorded in the count table and in each rank's protocol log.
constexpr int kProtocolPayloadFirst = 1;
constexpr int kProtocolCountFirst = 2;

// A count table row (one per source on each FFN rank), in i32: the header,
// then the rows of each local expert.
constexpr int kCountTokens = 0;    // the source's num_tokens this step
constexpr int kCountRouted = 1;    // its tokens that name an expert of this FFN
constexpr int kCountProtocol = 2;  // the protocol it dispatched with
constexpr int kCountHeader = 4;

// What a source writes beside each token row it sends to an FFN rank.
// `epoch` marks the slot as this step's; stale slots keep an older epoch.
template <int kTopK>
struct SlotMeta {
  u64 epoch;
  i32 token;
  i32 collect_pos;          // rank of the token among this source's tokens for this FFN
  i32 local_expert[kTopK];  // local expert of slot k on this FFN, or -1
  float weight[kTopK];
  i32 pos[kTopK];           // rank of the token among this source's tokens for that expert
};

// Row geometry: the payload (bf16 or fp8 bytes), then fp32 scales (fp8 only).
template <int kHidden, bool kFp8>
struct RowShape {
  static constexpr int kPayloadBytes = kFp8 ? kHidden : kHidden * 2;
  static constexpr int kPayloadVecs = kPayloadBytes / 16;
  static constexpr int kNumScales = kFp8 ? kHidden / 128 : 0;
  static_assert(kPayloadBytes % 16 == 0, "a row must be a whole number of 16-byte vectors");
  static_assert(!kFp8 || kHidden % 128 == 0, "fp8 rows carry one scale per 128 channels");
};

__device__ __forceinline__ int warp_inclusive_sum(int value, int lane_idx) {
#pragma unroll
  for (int delta = 1; delta < 32; delta <<= 1) {
    const int other = __shfl_up_sync(kFullMask, value, delta);
    if (lane_idx >= delta) value += other;
  }
  return value;
}

// Exclusive prefix sums of `values[0, n)` into `out[0, n]` by one warp.
__device__ __forceinline__ void warp_exclusive_scan(const int* values, int* out, int n,
                                                    int lane_idx) {
  int running = 0;
  for (int base = 0; base < n; base += 32) {
    const int i = base + lane_idx;
    const int value = i < n ? values[i] : 0;
    const int inclusive = warp_inclusive_sum(value, lane_idx);
    if (i < n) out[i] = running + inclusive - value;
    running += __shfl_sync(kFullMask, inclusive, 31);
  }
  if (lane_idx == 0) out[n] = running;
}

// This warp's index in the grid, CTAs first: warp w of CTA b is w * gridDim.x + b.
// A warp-per-token loop over a short step (128 tokens on 132 CTAs of 16 warps)
// then gives one token to each SM, not 16 to each of the first 8: one SM's
// load bandwidth, not its latency, bounded a token's rows when they shared it.
__device__ __forceinline__ int grid_warp_idx(int warp_idx) {
  return warp_idx * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x);
}

// A warp copies one row: each lane issues a batch of 16-byte loads before any
// of their stores, so loads overlap instead of waiting one by one. `kCoherent`
// reads bypass L1 (buffers a peer writes); otherwise the read-only path.
template <int kVecs, bool kCoherent = false>
__device__ __forceinline__ void copy_row(int4* dst, const int4* src, int lane_idx) {
  constexpr int kPerLane = ceil_div(kVecs, 32);
  constexpr int kBatch = kPerLane < 8 ? kPerLane : 8;
#pragma unroll
  for (int base = 0; base < kPerLane; base += kBatch) {
    int4 values[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int v = (base + i) * 32 + lane_idx;
      if (v < kVecs) values[i] = kCoherent ? ptx::ld_cg_v4(src + v) : ptx::ld_nc_v4(src + v);
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int v = (base + i) * 32 + lane_idx;
      if (v < kVecs) dst[v] = values[i];
    }
  }
}

// Eight bf16 values in one 16-byte vector.
__device__ __forceinline__ void unpack_bf16x8(const int4& v, float (&out)[8]) {
  const u32 words[4] = {static_cast<u32>(v.x), static_cast<u32>(v.y), static_cast<u32>(v.z),
                        static_cast<u32>(v.w)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = bf16_to_float(static_cast<u16>(words[i] & 0xffffu));
    out[2 * i + 1] = bf16_to_float(static_cast<u16>(words[i] >> 16));
  }
}

__device__ __forceinline__ int4 pack_bf16x8(const float (&values)[8]) {
  u32 words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    words[i] = ptx::cvt_rn_bf16x2(values[2 * i], values[2 * i + 1]);
  return make_int4(static_cast<int>(words[0]), static_cast<int>(words[1]),
                   static_cast<int>(words[2]), static_cast<int>(words[3]));
}

}  // namespace afdep
