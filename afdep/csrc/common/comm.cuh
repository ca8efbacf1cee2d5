// Waits, assertions and the cross-rank abort. A wait never hangs silently: it
// times out naming its site, and it stops at once when a peer has aborted.
#pragma once
#include "common/params.cuh"
#include "common/ptx.cuh"
#include "common/types.cuh"

#ifndef AFDEP_ASSERT
#define AFDEP_ASSERT(cond, fmt, ...)                                              \
  do {                                                                            \
    if (!(cond)) {                                                                \
      printf("afdep assertion failed: " fmt " (%s:%d)\n", ##__VA_ARGS__, __FILE__, \
             __LINE__);                                                           \
      __trap();                                                                   \
    }                                                                             \
  } while (0)
#endif

namespace afdep {

enum RouteKind : u32 { kRouteNegative = 0, kRouteWide = 1, kRouteDuplicate = 2, kRouteDummy = 3 };

__device__ __forceinline__ const char* route_kind_name(u32 kind) {
  switch (kind) {
    case kRouteNegative: return "negative";
    case kRouteWide: return "wide";
    case kRouteDuplicate: return "duplicate";
    default: return "dummy";
  }
}

// Abort word: bit 63 set, then origin rank, route kind, slot and token.
__device__ __forceinline__ u64 pack_abort(u32 rank, u32 kind, u32 slot, u32 token) {
  return (1ull << 63) | (static_cast<u64>(rank & 0x7f) << 56) |
         (static_cast<u64>(kind & 0xff) << 48) | (static_cast<u64>(slot & 0xffff) << 32) |
         static_cast<u64>(token);
}

__device__ __noinline__ void print_route_abort(u64 code, int rank) {
  const u32 origin = static_cast<u32>((code >> 56) & 0x7f);
  const u32 kind = static_cast<u32>((code >> 48) & 0xff);
  const u32 slot = static_cast<u32>((code >> 32) & 0xffff);
  const u32 token = static_cast<u32>(code & 0xffffffffu);
  printf("afdep assertion failed: route %s token=%u slot=%u (detected on rank %u, seen on rank %d)\n",
         route_kind_name(kind), token, slot, origin, rank);
}

__device__ __forceinline__ u64* abort_word(const Params& p, int rank) {
  return peer_ptr<u64>(p, rank, p.off_abort);
}

// An invalid route: the first thread of this rank to see one tells every peer
// (so every rank's log names the route, not a timeout), prints and traps.
// Nothing has been sent yet: routes are checked before any store.
__device__ __noinline__ void route_fail(const Params& p, u32 kind, u32 token, u32 slot) {
  const int rank = static_cast<int>(p.rank);
  const u64 code = pack_abort(rank, kind, slot, token);
  const u64 previous = ptx::atom_cas_relaxed_sys(abort_word(p, rank), 0, code);
  if (previous == 0) {
    printf("afdep assertion failed: route %s token=%u slot=%u rank=%d\n", route_kind_name(kind),
           token, slot, rank);
    for (int peer = 0; peer < static_cast<int>(p.world_size); ++peer)
      if (peer != rank) ptx::st_relaxed_sys(abort_word(p, peer), code);
    ptx::fence_acq_rel_sys();
    __trap();
  }
  if (static_cast<int>((previous >> 56) & 0x7f) != rank) {
    print_route_abort(previous, rank);
    __trap();
  }
  // Another thread of this rank is reporting: it traps the context right after.
  const u64 start = ptx::globaltimer();
  while (ptx::globaltimer() - start < p.timeout_ns) __nanosleep(1000);
  __trap();
}

// Spin until *flag >= expected (flags hold epochs, or epoch multiples for
// counters). Past the timeout: print the site, rank, expected and seen values,
// then trap. A peer's abort ends the wait with that peer's message. The clock
// starts at the first miss: a flag already set costs its load alone. The
// weaken-acquire and narrow-scope mutants call a copy of it with a weaker flag
// load, which the fault engine makes in their scratch trees only
// (catalogs/afdep.toml, twin=).
__device__ __noinline__ void wait_until(const u64* flag, u64 expected, const char* site,
                                        const Params& p) {
  const u64 first = ptx::ld_acquire_sys(flag);
  if (static_cast<i64>(first - expected) >= 0) return;
  const int rank = static_cast<int>(p.rank);
  const u64* abort = abort_word(p, rank);
  const u64 start = ptx::globaltimer();
  while (true) {
    const u64 seen = ptx::ld_acquire_sys(flag);
    if (static_cast<i64>(seen - expected) >= 0) return;
    const u64 code = ptx::ld_relaxed_sys(abort);
    if (code != 0) {
      print_route_abort(code, rank);
      __trap();
    }
    if (ptx::globaltimer() - start > p.timeout_ns) {
      printf("afdep timeout: site=%s rank=%d expected=%llu seen=%llu\n", site, rank, expected,
             seen);
      __trap();
    }
  }
}

}  // namespace afdep
