// The per-buffer parameters every kernel reads from device memory. Written once
// at buffer creation by afdep/workspace.py, whose PARAM_FIELDS lists the same
// names in the same order (a CPU test compares the two). Every field is a u64,
// so the layout is an array and cannot drift with padding rules.
#pragma once
#include "common/types.cuh"

namespace afdep {

struct Params {
  // World and roles.
  u64 rank;
  u64 world_size;
  u64 num_attention;
  u64 num_ffn;
  u64 num_experts;
  u64 experts_per_ffn;
  u64 capacity;
  u64 source_ctas;
  u64 timeout_ns;
  // Symmetric workspace: byte offsets, identical on every rank.
  u64 off_abort;
  u64 off_done;
  u64 off_counts;
  u64 off_slot_meta;
  u64 off_slot_rows;
  u64 off_combine_flags;
  u64 off_combine_rows;
  u64 off_count_ready;   // count-first: u64[num_attention], released by each source
  u64 off_slot_flags;    // count-first: u64[num_attention * capacity], one per slot
  u64 off_prefix_ready;  // count-first: u64, the FFN's placement table is this step's
  u64 off_placement;     // count-first: i32 placement table (common/dispatch.cuh)
  u64 off_direct_x;      // ARM=attention: the FFN's output rows, written by the sources
  u64 off_direct_scales;
  u64 counts_stride;    // i32 entries per source in the count table
  u64 slot_meta_bytes;  // bytes per slot's metadata
  u64 row_bytes;        // bytes per slot row: the payload, then fp8 scales
  // Count-first knobs.
  u64 gate;             // 1: the epilogue waits for a source's all-rows flag first
  u64 ungated_tokens;   // steps with at most this many tokens per source run ungated
  u64 warp_count;       // warps per epilogue CTA that expand rows
  u64 unit_min_rows;    // consecutive slots an epilogue warp claims at once
  u64 collect_view;     // 1: FFN ranks receive the collect view
  // Device arrays of this rank.
  u64 peer_bases;       // u64[world_size]: every rank's symmetric base
  u64 epoch;            // u64: the step counter
  u64 num_tokens;       // i32: the token count the last dispatch used
  u64 token_ffn_mask;   // u32[capacity]: FFN ranks (local index bits) each token routes to
  u64 slot_epoch;       // u64[num_attention * capacity]: epoch a slot was last received
  u64 slot_rows;        // i32[num_attention * capacity * top_k]: expert-major row per slot, -1
  u64 slot_weights;     // f32[num_attention * capacity * top_k]
  u64 protocol_log;     // i32: the protocol this rank's last dispatch ran
  // FFN outputs: expert-major view.
  u64 out_x;
  u64 out_scales;
  u64 out_src_rank;
  u64 out_src_token;
  u64 out_topk_slot;
  u64 out_weight;
  u64 out_expert_offsets;
  u64 out_collect_row;
  // FFN outputs: collect view.
  u64 col_x;
  u64 col_scales;
  u64 col_src_rank;
  u64 col_src_token;
  u64 col_local_experts;
  u64 col_weights;
  u64 col_expert_rows;
};

template <typename T>
__device__ __forceinline__ T* local_ptr(u64 address) {
  return reinterpret_cast<T*>(address);
}

// `offset` bytes into rank `peer`'s symmetric workspace.
template <typename T>
__device__ __forceinline__ T* peer_ptr(const Params& p, int peer, u64 offset) {
  const u64 base = reinterpret_cast<const u64*>(p.peer_bases)[peer];
  return reinterpret_cast<T*>(base + offset);
}

// What every kernel begins with, bound to its own names (C++17 structured
// bindings: `const auto [thread_idx, lane_idx, warp_idx] = thread_index();`);
// the fault catalog's conditions and markers use those names, and a marker
// prints rank_idx (catalogs/afdep.toml, `rank`). A lambda cannot capture a
// binding before C++20: it takes a copy (`[&, lane_idx = lane_idx]`).
struct ThreadIndex {
  int thread_idx;  // in the CTA
  int lane_idx;
  int warp_idx;  // in the CTA
};

__device__ __forceinline__ ThreadIndex thread_index() {
  const int thread_idx = static_cast<int>(threadIdx.x);
  return {thread_idx, thread_idx % 32, thread_idx / 32};
}

// The deployment's shape, as Params holds it.
struct Geometry {
  int rank_idx;  // this rank
  int num_attention;
  int capacity;  // token slots per source rank
  int experts_per_ffn;
};

__device__ __forceinline__ Geometry geometry(const Params& p) {
  return {static_cast<int>(p.rank), static_cast<int>(p.num_attention),
          static_cast<int>(p.capacity), static_cast<int>(p.experts_per_ffn)};
}

// This step's epoch: the route kernel has counted it up before any other runs.
__device__ __forceinline__ u64 step_epoch(const Params& p) {
  return *local_ptr<const u64>(p.epoch);
}

}  // namespace afdep
