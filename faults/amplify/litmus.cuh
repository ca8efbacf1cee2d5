// Message-passing litmus, MC Mutants' way (docs/operators.md,
// "Amplification"): producer CTA i writes a payload of kWords 64-bit words,
// each on its own cache line, then publishes flag i with the publish op under
// test; the consumer CTA of instance i (perm maps consumer slots to instances,
// drawn per launch so pairs land apart) spins on the flag with the wait op,
// then reads the payload. A weak outcome: the flag showed epoch v and some
// word is older than v. Extra CTAs of the same launch may hammer a scratch
// buffer meanwhile (memory stress). The orders the target ships are its
// common/ptx.cuh primitives; the weaker ones its mutants switch to, which only a
// mutant's scratch tree defines (a catalog rule's twin), are the litmus's own,
// below. This file lies outside the target's sources so their digest does not
// change.
#pragma once
#include "common/ptx.cuh"

namespace litmus {

using u64 = unsigned long long;
namespace ptx = afdep::ptx;

// The weaker accesses, one macro per access form: `op` is the PTX instruction.
#define LITMUS_LOAD(name, op)                                                     \
  __device__ __forceinline__ u64 name(const u64* ptr) {                           \
    u64 value;                                                                    \
    asm volatile(op ".u64 %0, [%1];" : "=l"(value) : "l"(ptr) : "memory");        \
    return value;                                                                 \
  }
#define LITMUS_WRITE(name, op)                                                    \
  __device__ __forceinline__ void name(u64* ptr, u64 value) {                     \
    asm volatile(op ".u64 [%0], %1;" ::"l"(ptr), "l"(value) : "memory");          \
  }
LITMUS_LOAD(ld_acquire_gpu, "ld.acquire.gpu.global")
LITMUS_WRITE(st_release_gpu, "st.release.gpu.global")
LITMUS_WRITE(red_add_relaxed_sys, "red.relaxed.sys.global.add")
#undef LITMUS_LOAD
#undef LITMUS_WRITE

enum class Publish : int { kReleaseSys, kRelaxedSys, kReleaseGpu, kFenceRelaxedSys };
enum class Wait : int { kAcquireSys, kRelaxedSys, kAcquireGpu };
enum class Group : int { kThread, kWarp, kBlock };
// How the consumer reads the payload: ld.global.cg (L2, as the target's
// kernels read what a peer wrote) or a plain load (L1 may keep a stale line).
enum class Read : int { kL2, kCached };

constexpr u64 kLineWords = 16;  // 128-byte lines: no two locations share one
constexpr u64 kWordBits = 20;   // a word holds (epoch << kWordBits) | its index
constexpr u64 kStressCapNs = 2000000000ull;

__device__ __forceinline__ u64* word_at(u64* payload, u64 instance, u64 word, int words) {
  return payload + (instance * words + word) * kLineWords;
}

template <Publish kPublish>
__device__ __forceinline__ void publish(u64* flag, u64 epoch) {
  if constexpr (kPublish == Publish::kReleaseSys) {
    ptx::st_release_sys(flag, epoch);
  } else if constexpr (kPublish == Publish::kRelaxedSys) {
    ptx::st_relaxed_sys(flag, epoch);
  } else if constexpr (kPublish == Publish::kReleaseGpu) {
    st_release_gpu(flag, epoch);
  } else {
    ptx::fence_acq_rel_sys();
    ptx::st_relaxed_sys(flag, epoch);
  }
}

template <Wait kWait>
__device__ __forceinline__ u64 flag_load(const u64* flag) {
  if constexpr (kWait == Wait::kAcquireSys) return ptx::ld_acquire_sys(flag);
  else if constexpr (kWait == Wait::kRelaxedSys) return ptx::ld_relaxed_sys(flag);
  else return ld_acquire_gpu(flag);
}

// Which thread of the group writes (or reads) word w: thread 0; lane w of
// warp 0; lane 0 of warp w (words spread over the warps, so a block's
// missing barrier leaves other warps' stores behind the publish).
template <Group kGroup, int kThreads>
__device__ __forceinline__ bool owns(int tid, int w) {
  constexpr int kWarps = kThreads / 32;
  if constexpr (kGroup == Group::kThread) return tid == 0;
  else if constexpr (kGroup == Group::kWarp) return tid == w % 32;
  else return tid == (w % kWarps) * 32 + (w / kWarps) % 32;
}

template <Group kGroup>
__device__ __forceinline__ void group_barrier(int tid) {
  if constexpr (kGroup == Group::kWarp) {
    if (tid < 32) __syncwarp();
  } else if constexpr (kGroup == Group::kBlock) {
    __syncthreads();
  }
}

template <Publish kPublish, Group kProducers, bool kProducerBarrier, int kWords, int kThreads>
__device__ void produce(u64* payload, u64* flags, const u64* acks, u64 instance, u64 epoch_base,
                        u64 iterations, u64 spin_limit) {
  const int tid = threadIdx.x;
  for (u64 step = 1; step <= iterations; ++step) {
    const u64 epoch = epoch_base + step;
    // Paced by the consumer's ack of the step before, so every publish lands
    // while its consumer is spinning: the window a weak order needs.
    if (tid == 0)
      for (u64 spin = 0; spin < spin_limit; ++spin)
        if (ptx::ld_relaxed_sys(acks + instance * kLineWords) >= epoch - 1) break;
    group_barrier<kProducers>(tid);
    for (int w = 0; w < kWords; ++w)
      if (owns<kProducers, kThreads>(tid, w))
        *word_at(payload, instance, w, kWords) = (epoch << kWordBits) | static_cast<u64>(w);
    if constexpr (kProducerBarrier) group_barrier<kProducers>(tid);  // the barrier under test
    if (tid == 0) publish<kPublish>(flags + instance * kLineWords, epoch);
  }
}

// counts[instance]: {flags seen, weak outcomes, spins that ran out}, added to.
template <Read kRead>
__device__ __forceinline__ u64 payload_load(const u64* word) {
  if constexpr (kRead == Read::kL2) return ptx::ld_cg_u64(word);
  else return *word;
}

template <Wait kWait, Read kRead, Group kConsumers, int kWords, int kThreads>
__device__ void consume(u64* payload, const u64* flags, u64* acks, u64* counts, u64 instance,
                        u64 epoch_base, u64 iterations, u64 spin_limit) {
  __shared__ u64 seen_shared;
  const int tid = threadIdx.x;
  const bool reader = kConsumers == Group::kBlock || tid < (kConsumers == Group::kWarp ? 32 : 1);
  u64 seen_count = 0, weak_count = 0, missed_count = 0;
  for (u64 step = 1; step <= iterations; ++step) {
    const u64 epoch = epoch_base + step;
    if (tid == 0) {
      u64 seen = 0;
      for (u64 spin = 0; spin < spin_limit && seen == 0; ++spin) {
        const u64 value = flag_load<kWait>(flags + instance * kLineWords);
        seen = value >= epoch ? value : 0;
      }
      seen_shared = seen;
    }
    group_barrier<kConsumers>(tid);  // the wait's barrier: the group reads after thread 0's load
    const u64 seen = reader ? seen_shared : 0;
    bool stale = false;
    if (seen != 0)
      for (int w = 0; w < kWords; ++w)
        if (owns<kConsumers, kThreads>(tid, w)) {
          const u64 value = payload_load<kRead>(word_at(payload, instance, w, kWords));
          stale |= (value >> kWordBits) < seen || (value & ((1ull << kWordBits) - 1)) != w;
        }
    if constexpr (kConsumers == Group::kWarp) {
      if (tid < 32) stale = __any_sync(0xffffffffu, stale);
    } else if constexpr (kConsumers == Group::kBlock) {
      stale = __syncthreads_or(stale);
    }
    if (tid == 0) {
      seen_count += seen != 0;
      weak_count += seen != 0 && stale;
      missed_count += seen == 0;
      ptx::st_relaxed_sys(acks + instance * kLineWords, epoch);  // read: the next step may come
    }
    group_barrier<kConsumers>(tid);  // seen_shared is rewritten next step
  }
  if (tid == 0) {
    counts[instance * 3 + 0] += seen_count;
    counts[instance * 3 + 1] += weak_count;
    counts[instance * 3 + 2] += missed_count;
  }
}

// Loads and stores over a scratch buffer, each thread its own hashed lines,
// until every litmus CTA of the launch is done (or a cap, should one never be).
__device__ void stress(u64* scratch, u64 scratch_lines, const u64* done, u64 done_target) {
  volatile u64* lines = scratch;
  const u64 start = ptx::globaltimer();
  u64 state = (static_cast<u64>(blockIdx.x) << 32) ^ (threadIdx.x * 0x9e3779b97f4a7c15ull);
  for (u64 round = 0;; ++round) {
    if ((round & 63) == 0 && (ptx::ld_relaxed_sys(done) >= done_target ||
                              ptx::globaltimer() - start > kStressCapNs))
      return;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    volatile u64* line = lines + ((state >> 33) % scratch_lines) * kLineWords;
    if (round & 1) *line = *line + 1;
    else (void)*line;
  }
}

template <Publish kPublish, Wait kWait, Read kRead, Group kProducers, bool kProducerBarrier,
          Group kConsumers, int kWords, int kThreads>
__global__ void __launch_bounds__(kThreads, 1)
    mp_litmus(u64* payload, u64* flags, u64* acks, const u64* perm, u64* counts, u64* scratch,
              u64 scratch_lines, u64* done, u64 done_target, u64 epoch_base, u64 pairs,
              u64 iterations, u64 spin_limit, u64 first_cta) {
  static_assert(kWords >= 1 && kWords <= 32 && kThreads % 32 == 0, "a word per lane at most");
  const u64 cta = blockIdx.x + first_cta;  // first_cta: across GPUs, each GPU runs one role
  if (cta >= 2 * pairs) {
    stress(scratch, scratch_lines, done, done_target);
    return;
  }
  if (cta < pairs)
    produce<kPublish, kProducers, kProducerBarrier, kWords, kThreads>(
        payload, flags, acks, cta, epoch_base, iterations, spin_limit);
  else
    consume<kWait, kRead, kConsumers, kWords, kThreads>(payload, flags, acks, counts, perm[cta - pairs],
                                                 epoch_base, iterations, spin_limit);
  __syncthreads();
  if (threadIdx.x == 0) red_add_relaxed_sys(done, 1);
}

}  // namespace litmus
