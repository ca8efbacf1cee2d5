// Our harness for the all-reduce kernels of flashinfer's trtllm_allreduce.cuh
// (docs/targets.md): N logical ranks on ONE GPU, each rank's kernels on a
// stream of its own, every rank's output checked against the host's sum.
//
//   harness_ar --ranks 2|4|8 --kernel lamport|oneshot|twoshot [--mode copy|push|memcpy]
//              [--tokens T...] [--hidden H] [--steps S] [--seed K] [--stagger-us U]
//              [--no-drain] [--timeout-s SECONDS]
//
// lamport: the Lamport one-shot all-reduce + residual + RMSNorm kernel
//   (lamport_style_one_shot_all_reduce_norm_kernel, its Reducer in push mode),
//   through the header's own launcher; at most 16 tokens (the header's limit).
// oneshot, twoshot: oneShotAllReduceKernel / twoShotAllReduceKernel (no fusion),
//   through the header's AllReduceDispatch, with --mode copy (block_barrier),
//   push (block_barrier, push layout) or memcpy (the input copied on the stream,
//   multi_gpu_barrier). Neither has a Lamport form in this header.
// Each token count's --steps launches of every rank are queued at once;
// every rank's launches end before the next token count's (the Lamport
// buffers then set anew) unless --no-drain, which queues them all at once:
// it probes how the header's layouts take a size change (run() says why
// they may not), and is in no config of the catalog.
// --stagger-us U holds rank r's stream r * U us before what comes first on it.
//
// The header is fetched from the package registry into a workspace
// (python -m tools.targets.fetch flashinfer_comm --into WS), never copied
// here; build it with
//   nvcc -arch=sm_90a -std=c++17 --expt-relaxed-constexpr -O2 -I WS/include
//        -I WS/spdlog/include -DFAULTS_SOURCE_DIGEST="\"<digest>\"" harness_ar.cu
//
// What it prints (the catalog's [target.log] reads them; the same lines as harness.cu):
//   "native_source_sha256": "<digest>"            first, so a hung run has it too
//   Mismatched rank=<r> step=<s> index=<i> got=<g> want=<w> tokens=<t> buffer=<b>  (8 at most)
//   faults timeout: site=harness rank=<r>         the host's deadline passed
//   CUDA error: <name>: <text>                    a CUDA call failed
//   harness: ok ...                               every output matched (exit 0)
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// The header's own includes, first: the launch shim below renames no call of theirs.
#include "flashinfer/exception.h"
#include "flashinfer/logging.h"
#include "flashinfer/utils.cuh"
#include "flashinfer/vec_dtypes.cuh"

#ifndef FAULTS_SOURCE_DIGEST
#define FAULTS_SOURCE_DIGEST "unknown"
#endif

// What code the fault engine injects into the header may call (the catalog's
// clock and rank): defined before the header, so every site sees them.
// The clock: the GPU's global nanosecond timer.
__device__ __forceinline__ unsigned long long faults_globaltimer() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

// The rank of the running kernel, wherever the code is (block_barrier() and
// the flag helpers have no rank of their own in scope): rank r's kernels are
// launched with r * kRankSmemBytes more bytes of dynamic shared memory than
// the header asks for (the launch shim below adds them); these kernels use
// none of it.
constexpr int kRankSmemBytes = 16;
__device__ __forceinline__ int faults_rank() {
  unsigned int bytes;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return static_cast<int>(bytes) / kRankSmemBytes;
}

// ------------------------------------------------------------ launch shim
// The header's launchers call cudaLaunchKernelEx with a configuration they
// build themselves. Every such call in the header lands here instead: the
// configuration gets the rank's dynamic shared memory (faults_rank()), and in
// a dry pass it is only recorded, so the harness learns the grids, blocks and
// clusters the header picks before it launches anything.
namespace faults_launch {
int rank = 0;      // whose launch the header is making
bool dry = false;  // record, do not launch

struct Seen {
  const void* kernel;
  dim3 grid, block;
  size_t smem;
  unsigned cluster;  // 1: no cluster
};
std::vector<Seen> seen;

template <typename... Exp, typename... Act>
cudaError_t launch_ex(const cudaLaunchConfig_t* config, void (*kernel)(Exp...), Act&&... args) {
  cudaLaunchConfig_t tagged = *config;
  tagged.dynamicSmemBytes += static_cast<size_t>(rank) * kRankSmemBytes;
  if (dry) {
    unsigned cluster = 1;
    for (unsigned i = 0; i < tagged.numAttrs; ++i) {
      if (tagged.attrs[i].id == cudaLaunchAttributeClusterDimension) {
        cluster = tagged.attrs[i].val.clusterDim.x;
      }
    }
    seen.push_back({reinterpret_cast<const void*>(kernel), tagged.gridDim, tagged.blockDim,
                    tagged.dynamicSmemBytes, cluster});
    return cudaSuccess;
  }
  return cudaLaunchKernelEx(&tagged, kernel, std::forward<Act>(args)...);
}
}  // namespace faults_launch

#define cudaLaunchKernelEx ::faults_launch::launch_ex
#include "flashinfer/comm/trtllm_allreduce.cuh"
#undef cudaLaunchKernelEx

namespace ar = flashinfer::trtllm_allreduce;
using bf16 = __nv_bfloat16;
constexpr int kVecSize = 16 / sizeof(bf16);  // 8 values a thread
constexpr int kMaxMismatchLines = 8;
constexpr int kValueSpan = 31;  // integers in [-15, 15]: 8 ranks and a residual sum exactly in bf16
constexpr float kEps = 1e-5f;
constexpr int kMaxRanks = static_cast<int>(ar::MAX_RANKS_PER_NODE);
// Each barrier buffer: block_barrier's slots reach (2 * (grid + 1) + 1) * N words
// at most (grid <= MAX_ALL_REDUCE_BLOCKS), multi_gpu_barrier's 2 * N.
constexpr int kFlagWords = 4 * static_cast<int>(ar::MAX_ALL_REDUCE_BLOCKS) * kMaxRanks;

enum class Kernel { kLamport, kOneShot, kTwoShot };
enum class Mode { kCopy, kPush, kMemcpy };

struct Options {
  int ranks = 2;
  Kernel kernel = Kernel::kLamport;
  Mode mode = Mode::kCopy;
  bool mode_given = false;
  std::vector<int> tokens{1, 7, 16};
  int hidden = 1024;
  int steps = 3;
  unsigned seed = 1;
  int stagger_us = 0;
  bool drain = true;  // every rank's launches end before the next token count's
  double timeout_s = 20.0;
};

const char* kernel_name(Kernel kernel) {
  return kernel == Kernel::kLamport ? "lamport" : kernel == Kernel::kOneShot ? "oneshot" : "twoshot";
}

const char* mode_name(Mode mode) {
  return mode == Mode::kCopy ? "copy" : mode == Mode::kPush ? "push" : "memcpy";
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "harness_ar: error: %s\n", why.c_str());
  std::exit(2);
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::printf("CUDA error: %s: %s (%s)\n", cudaGetErrorName(status),
                cudaGetErrorString(status), what);
    std::fflush(stdout);
    std::_Exit(1);
  }
}

int number(const char* text, const char* option, long least) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < least || value > (1 << 24)) {
    usage(std::string(option) + ": an integer >= " + std::to_string(least) + ", got '" + text + "'");
  }
  return static_cast<int>(value);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(arg + ": needs a value");
      return argv[++i];
    };
    if (arg == "--ranks") {
      options.ranks = number(value(), "--ranks", 1);
    } else if (arg == "--kernel") {
      std::string kernel = value();
      if (kernel == "lamport") {
        options.kernel = Kernel::kLamport;
      } else if (kernel == "oneshot") {
        options.kernel = Kernel::kOneShot;
      } else if (kernel == "twoshot") {
        options.kernel = Kernel::kTwoShot;
      } else {
        usage("--kernel: lamport, oneshot or twoshot, got '" + kernel + "'");
      }
    } else if (arg == "--mode") {
      std::string mode = value();
      if (mode == "copy") {
        options.mode = Mode::kCopy;
      } else if (mode == "push") {
        options.mode = Mode::kPush;
      } else if (mode == "memcpy") {
        options.mode = Mode::kMemcpy;
      } else {
        usage("--mode: copy, push or memcpy, got '" + mode + "'");
      }
      options.mode_given = true;
    } else if (arg == "--tokens") {
      options.tokens.clear();
      while (i + 1 < argc && argv[i + 1][0] != '-') {
        options.tokens.push_back(number(argv[++i], "--tokens", 1));
      }
      if (options.tokens.empty()) usage("--tokens: one count at least");
    } else if (arg == "--hidden") {
      options.hidden = number(value(), "--hidden", 1);
    } else if (arg == "--steps") {
      options.steps = number(value(), "--steps", 1);
    } else if (arg == "--seed") {
      options.seed = static_cast<unsigned>(number(value(), "--seed", 1));
    } else if (arg == "--stagger-us") {
      options.stagger_us = number(value(), "--stagger-us", 0);
    } else if (arg == "--no-drain") {
      options.drain = false;
    } else if (arg == "--timeout-s") {
      options.timeout_s = number(value(), "--timeout-s", 1);
    } else {
      usage("unknown argument '" + arg + "'");
    }
  }
  if (options.ranks != 2 && options.ranks != 4 && options.ranks != 8) {
    usage("--ranks: 2, 4 or 8, got " + std::to_string(options.ranks));
  }
  if (options.kernel == Kernel::kLamport) {
    if (options.mode_given) usage("--mode: only for --kernel oneshot or twoshot");
    // The launcher's CTAs cover a token with hidden / 8 threads in whole warps.
    if (options.hidden % (kVecSize * 32) != 0) {
      usage("--hidden: a multiple of 256 for the Lamport kernel, got " + std::to_string(options.hidden));
    }
    for (int tokens : options.tokens) {
      if (!ar::is_lamport_supported<bf16>(tokens, options.hidden)) {
        usage("--tokens: the header runs the Lamport kernel for at most " +
              std::to_string(ar::details::kLamportTokenNumThreshold) + " tokens of hidden >= " +
              std::to_string(ar::details::kLamportHiddenSizeThreshold) + ", got " +
              std::to_string(tokens));
      }
    }
  } else if (options.kernel == Kernel::kTwoShot && options.hidden % (kVecSize * options.ranks) != 0) {
    usage("--hidden: a multiple of 8 * ranks (the two-shot split), got " + std::to_string(options.hidden));
  } else if (options.hidden % kVecSize != 0) {
    usage("--hidden: a multiple of 8 (16-byte vectors), got " + std::to_string(options.hidden));
  }
  return options;
}

// ------------------------------------------------------------------ inputs
// Step-encoded values: small integers (exact +0.0 among them: a Lamport poll
// that takes +0.0 for its -0.0 sentinel never ends) whose sums over 8 ranks
// and a residual are exact in bf16 and order-free; a value moves by one every
// launch, so a read of an earlier launch's data shows.
int input_value(unsigned seed, int launch, int rank, int64_t index) {
  uint64_t h = (static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(rank) << 40) ^ static_cast<uint64_t>(index);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<int>((h + static_cast<uint64_t>(launch)) % kValueSpan) - kValueSpan / 2;
}

int residual_value(unsigned seed, int launch, int rank, int64_t index) {
  return input_value(seed ^ 0x5bd1e995u, launch + 7, rank + kMaxRanks, index);
}

uint16_t bf16_bits(float value) {  // exact for the small integers used here
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t bf16_round(double value) {  // round to nearest even, as __float2bfloat16
  float narrow = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &narrow, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_value(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// -------------------------------------------------------------- workspace
// Each rank's buffers, as the header's AllReduceParams::deserialize reads a
// rank's pointer table (NUM_POINTERS_PER_RANK = 7 pointers a rank): [0, N)
// every rank's ping buffer, [N, 2N) pong, [2N, 3N) barrier-in flags, [3N, 4N)
// barrier-out flags, then the three Lamport buffers [4N, 7N); after them this
// rank's two flag counters (deserialize adds one a call: [7N] the Lamport
// kernel's, [7N + 1] the others'). "Peers" are plain pointers into the one
// device's memory.
struct Workspace {
  int ranks = 0;
  int64_t lamport_bytes = 0;
  std::vector<void*> ping, pong, barrier_in, barrier_out;
  std::vector<void*> lamport[3];
  std::vector<std::vector<int64_t>> tables;  // one a rank: what deserialize reads
};

Workspace make_workspace(int ranks, int64_t max_elts) {
  Workspace ws;
  ws.ranks = ranks;
  // A rank's buffer holds every rank's slot (push modes, and the Lamport layout).
  const int64_t bytes = ranks * max_elts * static_cast<int64_t>(sizeof(bf16));
  ws.lamport_bytes = bytes;
  auto zeroed = [](int64_t size, const char* what) {
    void* p = nullptr;
    check(cudaMalloc(&p, size), what);
    check(cudaMemset(p, 0, size), what);
    return p;
  };
  for (int r = 0; r < ranks; ++r) {
    ws.ping.push_back(zeroed(bytes, "ping buffer"));
    ws.pong.push_back(zeroed(bytes, "pong buffer"));
    ws.barrier_in.push_back(zeroed(kFlagWords * sizeof(uint32_t), "barrier-in flags"));
    ws.barrier_out.push_back(zeroed(kFlagWords * sizeof(uint32_t), "barrier-out flags"));
    for (auto& buffer : ws.lamport) buffer.push_back(zeroed(bytes, "Lamport buffer"));
  }
  const int pointers = static_cast<int>(ar::NUM_POINTERS_PER_RANK) * ranks;
  for (int r = 0; r < ranks; ++r) {
    std::vector<int64_t> table(pointers + 2, 0);
    const std::vector<void*>* groups[] = {&ws.ping, &ws.pong, &ws.barrier_in, &ws.barrier_out,
                                          &ws.lamport[0], &ws.lamport[1], &ws.lamport[2]};
    int at = 0;
    for (const auto* group : groups) {
      for (void* p : *group) table[at++] = reinterpret_cast<int64_t>(p);
    }
    ws.tables.push_back(table);
  }
  return ws;
}

// ---------------------------------------------------------------- launches
struct Launch {
  int tokens = 0;
  int step = 0;   // within its token count
  int index = 0;  // over the whole run: what the inputs encode
  std::vector<bf16*> in, out, residual, intermediate;
};

std::vector<Launch> make_launches(const Options& options) {
  std::vector<Launch> launches;
  int index = 0;
  const bool lamport = options.kernel == Kernel::kLamport;
  auto device_copy = [](const std::vector<uint16_t>& host, const char* what) {
    bf16* p = nullptr;
    check(cudaMalloc(&p, host.size() * sizeof(bf16)), what);
    check(cudaMemcpy(p, host.data(), host.size() * sizeof(bf16), cudaMemcpyHostToDevice), what);
    return p;
  };
  auto nan_filled = [](int64_t size, const char* what) {
    bf16* p = nullptr;
    check(cudaMalloc(&p, size * sizeof(bf16)), what);
    check(cudaMemset(p, 0xff, size * sizeof(bf16)), what);  // NaN until written
    return p;
  };
  for (int tokens : options.tokens) {
    const int64_t size = static_cast<int64_t>(tokens) * options.hidden;
    for (int step = 0; step < options.steps; ++step, ++index) {
      Launch launch{tokens, step, index, {}, {}, {}, {}};
      for (int r = 0; r < options.ranks; ++r) {
        std::vector<uint16_t> host(size);
        for (int64_t i = 0; i < size; ++i) {
          host[i] = bf16_bits(static_cast<float>(input_value(options.seed, index, r, i)));
        }
        launch.in.push_back(device_copy(host, "input"));
        launch.out.push_back(nan_filled(size, "output"));
        if (lamport) {
          for (int64_t i = 0; i < size; ++i) {
            host[i] = bf16_bits(static_cast<float>(residual_value(options.seed, index, r, i)));
          }
          launch.residual.push_back(device_copy(host, "residual"));
          launch.intermediate.push_back(nan_filled(size, "intermediate"));
        }
      }
      launches.push_back(launch);
    }
  }
  return launches;
}

// Rank r's parameters for one launch, from its pointer table as the header's
// deserialize() reads it (it also counts the rank's flag up by one: a real
// call does the same), then what the caller fills in (trtllm_allreduce.cu's
// wrapper): sizes, the rank's buffers and the Lamport pointers at stride
// MAX_RANKS_PER_NODE.
ar::AllReduceParams<bf16> params_for(const Options& options, Workspace& ws, std::vector<int64_t>& table,
                                     const Launch& launch, int rank) {
  const ar::AllReduceFusionOp op = options.kernel == Kernel::kLamport
                                       ? ar::AllReduceFusionOp::RESIDUAL_RMS_NORM
                                       : ar::AllReduceFusionOp::NONE;
  ar::AllReduceParams<bf16> params = ar::AllReduceParams<bf16>::deserialize(
      table.data(), ws.ranks, rank, launch.tokens, options.hidden, op);
  params.elts_total = static_cast<size_t>(launch.tokens) * options.hidden;
  params.local_input_buffer_ptr = launch.in[rank];
  params.local_output_buffer_ptr = launch.out[rank];
  params.fusion_params.hidden_size = options.hidden;
  params.fusion_params.eps = kEps;
  if (options.kernel == Kernel::kLamport) {
    params.fusion_params.residual_buffer = launch.residual[rank];
    params.fusion_params.intermediate_buffer = launch.intermediate[rank];
  }
  for (int r = 0; r < ws.ranks; ++r) {
    for (int k = 0; k < 3; ++k) {
      params.fusion_params.lamport_peer_comm_buffer_ptrs[r + k * kMaxRanks] = ws.lamport[k][r];
    }
  }
  return params;
}

// One rank's launch through the header's own host launcher.
template <int N>
void launch_rank(const Options& options, Workspace& ws, std::vector<int64_t>& table,
                 const Launch& launch, int rank, cudaStream_t stream) {
  ar::AllReduceParams<bf16> params = params_for(options, ws, table, launch, rank);
  faults_launch::rank = rank;
  cudaError_t status = cudaSuccess;
  if (options.kernel == Kernel::kLamport) {
    status = ar::reduce_fusion::lamport_style_one_shot_all_reduce_norm_kernel_launcher<bf16, N, false,
                                                                                      false>(
        params, /*launch_with_pdl=*/false, stream);
  } else {
    const ar::AllReduceStrategyType algo = options.kernel == Kernel::kOneShot
                                               ? ar::AllReduceStrategyType::ONESHOT
                                               : ar::AllReduceStrategyType::TWOSHOT;
    const ar::AllReduceFusionOp none = ar::AllReduceFusionOp::NONE;
    switch (options.mode) {
      case Mode::kCopy:
        status = ar::AllReduceDispatch<bf16, N, false, false>(algo, none, params, false, stream);
        break;
      case Mode::kPush:
        status = ar::AllReduceDispatch<bf16, N, true, false>(algo, none, params, false, stream);
        break;
      case Mode::kMemcpy:
        status = ar::AllReduceDispatch<bf16, N, false, true>(algo, none, params, false, stream);
        break;
    }
  }
  faults_launch::rank = 0;
  check(status, "the header's launcher");
  check(cudaGetLastError(), "kernel launch");
}

// Wait for every stream until the deadline; past it, say which rank hung and
// leave at once (a spinning kernel never returns: no CUDA call may wait on it).
void wait_or_time_out(const std::vector<cudaStream_t>& streams, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::vector<bool> done(streams.size(), false);
  for (;;) {
    bool all = true;
    for (size_t r = 0; r < streams.size(); ++r) {
      if (done[r]) continue;
      cudaError_t status = cudaStreamQuery(streams[r]);
      if (status == cudaErrorNotReady) {
        all = false;
        continue;
      }
      check(status, "a rank's kernels");
      done[r] = true;
    }
    if (all) return;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t r = 0; r < streams.size(); ++r) {
        if (!done[r]) {
          std::printf("faults timeout: site=harness rank=%zu\n", r);
          break;
        }
      }
      std::fflush(stdout);
      std::_Exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Before anything runs: each token count's launch as the header configures it
// (a dry pass of its launcher through the shim, as the last rank, whose
// dynamic shared memory is the largest), refused unless every rank's CTAs fit
// on the GPU at once (every kernel here spins on its peers' CTAs), and, for
// the Lamport kernel, unless its grid covers the tokens exactly.
template <int N>
void refuse_unless_coresident(const Options& options, Workspace& ws, const std::vector<Launch>& launches,
                              cudaStream_t stream, int sms) {
  for (const Launch& launch : launches) {
    if (launch.step != 0) continue;  // one launch of each token count
    std::vector<int64_t> scratch = ws.tables[N - 1];  // deserialize counts a copy's flag
    faults_launch::dry = true;
    faults_launch::seen.clear();
    launch_rank<N>(options, ws, scratch, launch, N - 1, stream);
    faults_launch::dry = false;
    if (faults_launch::seen.size() != 1) {
      usage("the header's launcher made " + std::to_string(faults_launch::seen.size()) +
            " launches for one call, not 1");
    }
    const faults_launch::Seen seen = faults_launch::seen.front();
    const int64_t grid = static_cast<int64_t>(seen.grid.x) * seen.grid.y * seen.grid.z;
    const int block = static_cast<int>(seen.block.x * seen.block.y * seen.block.z);
    const int64_t elts = static_cast<int64_t>(launch.tokens) * options.hidden;
    if (options.kernel == Kernel::kLamport && grid * block * kVecSize != elts) {
      usage("refused: the Lamport launcher's " + std::to_string(grid) + " CTAs x " +
            std::to_string(block) + " threads do not cover " + std::to_string(launch.tokens) +
            " tokens of " + std::to_string(options.hidden) + " exactly: another --hidden");
    }
    std::string fits;
    if (seen.cluster > 1) {
      cudaLaunchConfig_t config = {};
      config.gridDim = seen.grid;
      config.blockDim = seen.block;
      config.dynamicSmemBytes = seen.smem;
      cudaLaunchAttribute attribute[1];
      attribute[0].id = cudaLaunchAttributeClusterDimension;
      attribute[0].val.clusterDim.x = seen.cluster;
      attribute[0].val.clusterDim.y = 1;
      attribute[0].val.clusterDim.z = 1;
      config.attrs = attribute;
      config.numAttrs = 1;
      int clusters = 0;
      check(cudaOccupancyMaxActiveClusters(&clusters, seen.kernel, &config), "cluster occupancy");
      if (N * (grid / seen.cluster) > clusters) {
        fits = std::to_string(clusters) + " clusters of " + std::to_string(seen.cluster) + " at once";
      }
    } else {
      // The flag-barrier kernels' streams start behind the stagger's kernels
      // (one CTA each), which may still hold their SMs.
      const int held = options.stagger_us > 0 ? N - 1 : 0;
      int per_sm = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, seen.kernel, block, seen.smem),
            "occupancy");
      if (N * grid + held > static_cast<int64_t>(per_sm) * sms) {
        fits = std::to_string(per_sm) + " a SM x " + std::to_string(sms) + " SMs";
      }
    }
    if (!fits.empty()) {
      usage("refused: " + std::to_string(N) + " ranks x " + std::to_string(grid) +
            " CTAs cannot all be resident (" + fits + "): fewer tokens or a smaller --hidden");
    }
  }
  wait_or_time_out({stream}, options.timeout_s);  // the memcpy mode's dry pass copies on it
}

// Rank r's stream is held r * stagger before what comes next on it: a rank
// that comes late (its stream still busy) to its buffers' set-up or to the
// collective.
__global__ void faults_hold_stream(unsigned long long ns) {
  const unsigned long long start = faults_globaltimer();
  while (faults_globaltimer() - start < ns) {
  }
}

void stagger(const Options& options, const std::vector<cudaStream_t>& streams) {
  if (options.stagger_us == 0) return;
  for (size_t r = 1; r < streams.size(); ++r) {
    faults_hold_stream<<<1, 1, 0, streams[r]>>>(r * options.stagger_us * 1000ull);
    check(cudaGetLastError(), "stagger");
  }
}

// The Lamport buffers set to -0.0 by the header's lamportInitializeAll, each
// rank's on its own stream after its stagger. The function ends with
// cudaDeviceSynchronize(), so it is called only while no collective kernel
// is on the device (the one host wait here without a deadline: it waits for
// the stagger and the initialisation kernels, which end on their own).
void initialize_lamport(const Options& options, const Workspace& ws,
                        const std::vector<cudaStream_t>& streams) {
  stagger(options, streams);
  for (int r = 0; r < ws.ranks; ++r) {
    check(ar::lamportInitializeAll<bf16>(ws.lamport[0][r], ws.lamport[1][r], ws.lamport[2][r],
                                         ws.lamport_bytes, streams[r]),
          "lamportInitializeAll");
  }
}

// One rank's buffer of one launch, read back.
std::vector<uint16_t> read_back(const bf16* device, int64_t size, const char* what) {
  std::vector<uint16_t> host(size);
  check(cudaMemcpy(host.data(), device, size * sizeof(bf16), cudaMemcpyDeviceToHost), what);
  return host;
}

// Every rank's output against the host's sum: the all-reduce's bit for bit;
// the Lamport kernel's intermediate (sum + residual) bit for bit and its
// RMSNorm output within two bf16 steps of the exact norm (rsqrtf and the
// float sum of squares are not exact; a value read from the wrong launch
// moves the intermediate).
int64_t count_mismatches(const Options& options, const std::vector<Launch>& launches) {
  int64_t mismatches = 0;
  auto report = [&](int rank, const Launch& launch, int64_t i, float got, float want, const char* buffer) {
    if (++mismatches <= kMaxMismatchLines) {
      std::printf("Mismatched rank=%d step=%d index=%lld got=%g want=%g tokens=%d buffer=%s\n", rank,
                  launch.index, static_cast<long long>(i), got, want, launch.tokens, buffer);
    }
  };
  const bool lamport = options.kernel == Kernel::kLamport;
  for (const Launch& launch : launches) {
    const int64_t size = static_cast<int64_t>(launch.tokens) * options.hidden;
    std::vector<int> sum(size, 0);
    for (int64_t i = 0; i < size; ++i) {
      for (int r = 0; r < options.ranks; ++r) sum[i] += input_value(options.seed, launch.index, r, i);
    }
    for (int r = 0; r < options.ranks; ++r) {
      std::vector<uint16_t> got = read_back(launch.out[r], size, "output");
      if (!lamport) {
        for (int64_t i = 0; i < size; ++i) {
          const uint16_t want = bf16_bits(static_cast<float>(sum[i]));
          if (got[i] != want) report(r, launch, i, bf16_value(got[i]), bf16_value(want), "out");
        }
        continue;
      }
      std::vector<int> inter(size);
      for (int64_t i = 0; i < size; ++i) inter[i] = sum[i] + residual_value(options.seed, launch.index, r, i);
      const std::vector<uint16_t> got_inter = read_back(launch.intermediate[r], size, "intermediate");
      for (int64_t i = 0; i < size; ++i) {
        const uint16_t want = bf16_bits(static_cast<float>(inter[i]));
        if (got_inter[i] != want) {
          report(r, launch, i, bf16_value(got_inter[i]), bf16_value(want), "intermediate");
        }
      }
      for (int t = 0; t < launch.tokens; ++t) {
        const int64_t row = static_cast<int64_t>(t) * options.hidden;
        double squares = 0;
        for (int j = 0; j < options.hidden; ++j) squares += double(inter[row + j]) * inter[row + j];
        const double denom = 1.0 / std::sqrt(squares / options.hidden + kEps);
        for (int j = 0; j < options.hidden; ++j) {
          const double exact = inter[row + j] * denom;
          const float value = bf16_value(got[row + j]);
          if (!(std::fabs(value - exact) <= std::fabs(exact) / 64)) {  // NaN too
            report(r, launch, row + j, value, bf16_value(bf16_round(exact)), "out");
          }
        }
      }
    }
  }
  return mismatches;
}

template <int N>
int run(const Options& options) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "SM count");
  check(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 64 << 20), "printf buffer");
  const int max_tokens = *std::max_element(options.tokens.begin(), options.tokens.end());
  Workspace ws = make_workspace(N, static_cast<int64_t>(max_tokens) * options.hidden);
  const std::vector<Launch> launches = make_launches(options);
  std::vector<cudaStream_t> streams(N);
  for (auto& stream : streams) check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaDeviceSynchronize(), "setup");
  refuse_unless_coresident<N>(options, ws, launches, streams[0], sms);
  // Each token count's launches of every rank queued at once: a rank runs
  // ahead into its next launch (the next Lamport buffer, the other ping-pong
  // buffer and barrier parity) as far as the kernels' own synchronization
  // lets it. Between token counts every rank's launches end first (unless
  // --no-drain), because the header's layouts move with the size:
  // - a Lamport launch clears its own layout (elts_total a rank's slot) of the
  //   buffer of the launch before, so a new token count would leave values
  //   where a later poll reads: each token count starts from buffers set anew;
  // - block_barrier()'s slot for CTA b at an odd flag lies (grid + 1) slots
  //   past the even flag's, so the next launch's CTA b + grid + 1, with a
  //   larger grid, writes the slot a peer may still be waiting on for this
  //   launch's flag.
  size_t at = 0;
  for (bool first = true; at < launches.size(); first = false) {
    if (options.kernel == Kernel::kLamport) {
      if (first || options.drain) initialize_lamport(options, ws, streams);
    } else if (first) {
      stagger(options, streams);
    }
    const int tokens = launches[at].tokens;
    for (; at < launches.size() && (launches[at].tokens == tokens || !options.drain); ++at) {
      for (int r = 0; r < N; ++r) launch_rank<N>(options, ws, ws.tables[r], launches[at], r, streams[r]);
    }
    wait_or_time_out(streams, options.timeout_s);
  }
  const int64_t mismatches = count_mismatches(options, launches);
  if (mismatches > 0) {
    std::printf("harness: %lld mismatched values\n", static_cast<long long>(mismatches));
    return 1;
  }
  std::printf("harness: ok ranks=%d kernel=%s mode=%s launches=%zu hidden=%d\n", N,
              kernel_name(options.kernel), options.kernel == Kernel::kLamport ? "-" : mode_name(options.mode),
              launches.size(), options.hidden);
  return 0;
}

int main(int argc, char** argv) {
  std::printf("\"native_source_sha256\": \"%s\"\n", FAULTS_SOURCE_DIGEST);
  std::fflush(stdout);
  const Options options = parse(argc, argv);
  // One hardware queue a rank's stream at least, so no rank waits behind another's launch.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int status = 0;
  try {
    switch (options.ranks) {
      case 2: status = run<2>(options); break;
      case 4: status = run<4>(options); break;
      default: status = run<8>(options); break;
    }
  } catch (const std::exception& error) {  // a FLASHINFER_CHECK of the header's launchers
    std::printf("harness: error: %s\n", error.what());
    std::fflush(stdout);
    return 2;
  }
  std::fflush(stdout);
  return status;
}
