// Our harness for flashinfer's all-reduce fusion kernels (docs/targets.md):
// N logical ranks on ONE GPU, each rank's kernel on a stream of its own,
// every rank's output checked bit for bit against the host's sum.
//
//   harness --ranks 2|4|8 --kernel twoshot|oneshot [--tokens T...] [--hidden H]
//           [--steps S] [--seed K] [--timeout-s SECONDS]
//
// The header is fetched from the package registry into a workspace
// (python -m tools.targets.fetch flashinfer_comm --into WS), never copied
// here; build it with
//   nvcc -arch=sm_90a -std=c++17 --expt-relaxed-constexpr -O2 -I WS/include
//        -I WS/spdlog/include -DFAULTS_SOURCE_DIGEST="\"<digest>\"" harness.cu
//
// What it prints (the catalog's [target.log] reads them):
//   "native_source_sha256": "<digest>"            first, so a hung run has it too
//   Mismatched rank=<r> step=<s> index=<i> got=<g> want=<w> tokens=<t>   (8 at most)
//   faults timeout: site=harness rank=<r>         the host's deadline passed
//   CUDA error: <name>: <text>                    a CUDA call failed
//   harness: ok ...                               every output matched (exit 0)
#include <cuda_runtime.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

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

// The rank of the running kernel, wherever the code is (a Barrier method has
// no rank in scope): rank r is launched with r * kRankSmemBytes bytes of
// dynamic shared memory, which the kAllReduce kernels never use.
constexpr int kRankSmemBytes = 16;
__device__ __forceinline__ int faults_rank() {
  unsigned int bytes;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return static_cast<int>(bytes) / kRankSmemBytes;
}

#include "flashinfer/comm/trtllm_allreduce_fusion.cuh"

namespace fusion = flashinfer::trtllm_allreduce_fusion;
using bf16 = __nv_bfloat16;
constexpr fusion::AllReduceFusionPattern kPattern = fusion::AllReduceFusionPattern::kAllReduce;
constexpr int kVecSize = fusion::details::kBytesPerAccess / sizeof(bf16);  // 8 values a thread
constexpr int kMaxMismatchLines = 8;
constexpr int kValueSpan = 31;  // inputs are integers in [-15, 15]: 8 ranks sum exactly in bf16

enum class Kernel { kTwoShot, kOneShot };

struct Options {
  int ranks = 2;
  Kernel kernel = Kernel::kTwoShot;
  std::vector<int> tokens{1, 7, 64};
  int hidden = 1024;
  int steps = 3;
  unsigned seed = 1;
  double timeout_s = 20.0;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "harness: error: %s\n", why.c_str());
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

int positive(const char* text, const char* option) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > (1 << 24)) {
    usage(std::string(option) + ": a positive integer, got '" + text + "'");
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
      options.ranks = positive(value(), "--ranks");
    } else if (arg == "--kernel") {
      std::string kernel = value();
      if (kernel != "twoshot" && kernel != "oneshot") {
        usage("--kernel: twoshot or oneshot, got '" + kernel + "'");
      }
      options.kernel = kernel == "twoshot" ? Kernel::kTwoShot : Kernel::kOneShot;
    } else if (arg == "--tokens") {
      options.tokens.clear();
      while (i + 1 < argc && argv[i + 1][0] != '-') options.tokens.push_back(positive(argv[++i], "--tokens"));
      if (options.tokens.empty()) usage("--tokens: one count at least");
    } else if (arg == "--hidden") {
      options.hidden = positive(value(), "--hidden");
    } else if (arg == "--steps") {
      options.steps = positive(value(), "--steps");
    } else if (arg == "--seed") {
      options.seed = static_cast<unsigned>(positive(value(), "--seed"));
    } else if (arg == "--timeout-s") {
      options.timeout_s = positive(value(), "--timeout-s");
    } else {
      usage("unknown argument '" + arg + "'");
    }
  }
  if (options.ranks != 2 && options.ranks != 4 && options.ranks != 8) {
    usage("--ranks: 2, 4 or 8, got " + std::to_string(options.ranks));
  }
  int threads = options.hidden / kVecSize;
  if (options.hidden % kVecSize != 0 || threads > 1024 || threads < options.ranks) {
    usage("--hidden: a multiple of 8 giving ranks..1024 threads a token (one 16-byte vector "
          "each), got " + std::to_string(options.hidden));
  }
  return options;
}

// ------------------------------------------------------------------ inputs
// Step-encoded inputs: small integers (zeros and negatives among them) whose
// sums over 8 ranks are exact in bf16 and order-free; a value moves by one
// every launch, so a read of last launch's data shows.
int input_value(unsigned seed, int launch, int rank, int64_t index) {
  uint64_t h = (static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(rank) << 40) ^ static_cast<uint64_t>(index);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<int>((h + static_cast<uint64_t>(launch)) % kValueSpan) - kValueSpan / 2;
}

uint16_t bf16_bits(float value) {  // exact for the small integers used here
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_value(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// -------------------------------------------------------------- workspace
// Each rank's buffers, laid out as the header's workspace (void* array, one
// view per rank): [0, N) every rank's two-shot buffer, [N, 2N) every rank's
// barrier flags, [2N, 3N) every rank's Lamport triple buffer, [3N] this rank's
// state words {counter, two-shot flag, Lamport flag, comm bytes, clear size}.
struct Workspace {
  std::vector<void*> comm, flags, lamport, state;
  std::vector<void**> views;  // device arrays, one per rank
};

Workspace make_workspace(int ranks, int64_t max_size) {
  Workspace ws;
  const int64_t comm_bytes = ranks * max_size * static_cast<int64_t>(sizeof(bf16));
  std::vector<uint16_t> neg_zero(3 * comm_bytes / sizeof(bf16), 0x8000);  // Lamport: -0.0
  for (int r = 0; r < ranks; ++r) {
    void* p = nullptr;
    check(cudaMalloc(&p, 2 * max_size * sizeof(bf16)), "two-shot buffer");
    check(cudaMemset(p, 0, 2 * max_size * sizeof(bf16)), "two-shot buffer");
    ws.comm.push_back(p);
    check(cudaMalloc(&p, fusion::details::kBarrierFlagCount * ranks * sizeof(int)), "flags");
    check(cudaMemset(p, 0, fusion::details::kBarrierFlagCount * ranks * sizeof(int)), "flags");
    ws.flags.push_back(p);
    check(cudaMalloc(&p, 3 * comm_bytes), "Lamport buffer");
    check(cudaMemcpy(p, neg_zero.data(), 3 * comm_bytes, cudaMemcpyHostToDevice), "Lamport");
    ws.lamport.push_back(p);
    int words[8] = {0, 0, 0, static_cast<int>(comm_bytes), 0, 0, 0, 0};
    check(cudaMalloc(&p, sizeof(words)), "state");
    check(cudaMemcpy(p, words, sizeof(words), cudaMemcpyHostToDevice), "state");
    ws.state.push_back(p);
  }
  for (int r = 0; r < ranks; ++r) {
    std::vector<void*> view;
    for (auto* group : {&ws.comm, &ws.flags, &ws.lamport}) view.insert(view.end(), group->begin(), group->end());
    view.push_back(ws.state[r]);
    void** device = nullptr;
    check(cudaMalloc(&device, view.size() * sizeof(void*)), "workspace view");
    check(cudaMemcpy(device, view.data(), view.size() * sizeof(void*), cudaMemcpyHostToDevice), "view");
    ws.views.push_back(device);
  }
  return ws;
}

// ---------------------------------------------------------------- launches
// One launch: a token count and a step; every rank's input and output.
struct Launch {
  int tokens = 0;
  int step = 0;   // within its token count
  int index = 0;  // over the whole run: what the inputs encode
  std::vector<bf16*> in, out;
};

int grid_for(const Options& options, int tokens, int sms) {
  // The header's launcher without clusters: a CTA a token (one-shot), or a
  // CTA a token of each rank's share (two-shot), at most one a SM.
  int per_cta = options.kernel == Kernel::kOneShot ? tokens
                                                   : (tokens + options.ranks - 1) / options.ranks;
  return std::min(sms, per_cta);
}

template <int N>
void* kernel_of(Kernel kernel) {
  if (kernel == Kernel::kTwoShot) {
    return reinterpret_cast<void*>(&fusion::allreduce_fusion_kernel_twoshot_sync<kPattern, bf16, N, true>);
  }
  return reinterpret_cast<void*>(&fusion::allreduce_fusion_kernel_oneshot_lamport<kPattern, bf16, N, true, true>);
}

template <int N>
void launch_rank(const Options& options, const Workspace& ws, const Launch& launch, int rank,
                 int grid, cudaStream_t stream) {
  fusion::AllReduceFusionParams<bf16> params{};
  params.nranks = N;
  params.rank = rank;
  params.size = launch.tokens * options.hidden;
  params.hidden_dim = options.hidden;
  params.workspace = ws.views[rank];
  params.allreduce_in = launch.in[rank];
  params.allreduce_out = launch.out[rank];
  params.use_oneshot = options.kernel == Kernel::kOneShot;
  params.stream = stream;
  params.pattern = kPattern;
  const dim3 block(options.hidden / kVecSize);
  const size_t rank_smem = static_cast<size_t>(rank) * kRankSmemBytes;
  if (options.kernel == Kernel::kOneShot) {
    fusion::allreduce_fusion_kernel_oneshot_lamport<kPattern, bf16, N, true, true>
        <<<grid, block, rank_smem, stream>>>(params);
  } else {
    // The header's launcher's split: rank r reduces tokens [begin[r], begin[r] + count[r]).
    std::array<int, N> begin{}, count{};
    const int share = launch.tokens / N, rest = launch.tokens % N;
    for (int r = 0; r < N; ++r) {
      begin[r] = r * share + std::min(r, rest);
      count[r] = share + (r < rest ? 1 : 0);
    }
    fusion::allreduce_fusion_kernel_twoshot_sync<kPattern, bf16, N, true>
        <<<grid, block, rank_smem, stream>>>(params, begin, count);
  }
  check(cudaGetLastError(), "kernel launch");
}

void refuse_unless_coresident(const Options& options, void* kernel, int max_grid, int sms) {
  // Every rank's CTAs spin on the others': all of them must be resident at once.
  int per_sm = 0;
  const size_t smem = static_cast<size_t>(options.ranks - 1) * kRankSmemBytes;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, options.hidden / kVecSize, smem),
        "occupancy");
  if (static_cast<int64_t>(options.ranks) * max_grid > static_cast<int64_t>(per_sm) * sms) {
    usage("refused: " + std::to_string(options.ranks) + " ranks x " + std::to_string(max_grid) +
          " CTAs cannot all be resident (" + std::to_string(per_sm) + " a SM x " +
          std::to_string(sms) + " SMs): fewer tokens or a smaller --hidden");
  }
}

std::vector<Launch> make_launches(const Options& options) {
  std::vector<Launch> launches;
  int index = 0;
  for (int tokens : options.tokens) {
    const int64_t size = static_cast<int64_t>(tokens) * options.hidden;
    for (int step = 0; step < options.steps; ++step, ++index) {
      Launch launch{tokens, step, index, {}, {}};
      for (int r = 0; r < options.ranks; ++r) {
        std::vector<uint16_t> host(size);
        for (int64_t i = 0; i < size; ++i) {
          host[i] = bf16_bits(static_cast<float>(input_value(options.seed, index, r, i)));
        }
        bf16 *in = nullptr, *out = nullptr;
        check(cudaMalloc(&in, size * sizeof(bf16)), "input");
        check(cudaMemcpy(in, host.data(), size * sizeof(bf16), cudaMemcpyHostToDevice), "input");
        check(cudaMalloc(&out, size * sizeof(bf16)), "output");
        check(cudaMemset(out, 0xff, size * sizeof(bf16)), "output");  // NaN until written
        launch.in.push_back(in);
        launch.out.push_back(out);
      }
      launches.push_back(launch);
    }
  }
  return launches;
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

// Every rank's output against the host's sum, bit for bit.
int64_t count_mismatches(const Options& options, const std::vector<Launch>& launches) {
  int64_t mismatches = 0;
  for (const Launch& launch : launches) {
    const int64_t size = static_cast<int64_t>(launch.tokens) * options.hidden;
    std::vector<uint16_t> want(size);
    for (int64_t i = 0; i < size; ++i) {
      int sum = 0;
      for (int r = 0; r < options.ranks; ++r) sum += input_value(options.seed, launch.index, r, i);
      want[i] = bf16_bits(static_cast<float>(sum));
    }
    std::vector<uint16_t> got(size);
    for (int r = 0; r < options.ranks; ++r) {
      check(cudaMemcpy(got.data(), launch.out[r], size * sizeof(bf16), cudaMemcpyDeviceToHost), "output");
      for (int64_t i = 0; i < size; ++i) {
        if (got[i] == want[i]) continue;
        if (++mismatches <= kMaxMismatchLines) {
          std::printf("Mismatched rank=%d step=%d index=%lld got=%g want=%g tokens=%d\n", r,
                      launch.index, static_cast<long long>(i), bf16_value(got[i]),
                      bf16_value(want[i]), launch.tokens);
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
  int max_grid = 0, max_tokens = 0;
  for (int tokens : options.tokens) {
    max_grid = std::max(max_grid, grid_for(options, tokens, sms));
    max_tokens = std::max(max_tokens, tokens);
  }
  refuse_unless_coresident(options, kernel_of<N>(options.kernel), max_grid, sms);
  const Workspace ws = make_workspace(N, static_cast<int64_t>(max_tokens) * options.hidden);
  const std::vector<Launch> launches = make_launches(options);
  std::vector<cudaStream_t> streams(N);
  for (auto& stream : streams) check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  check(cudaDeviceSynchronize(), "setup");
  // Every launch of every rank queued at once: a rank runs ahead into its
  // next launch as far as the kernels' own synchronization lets it.
  for (const Launch& launch : launches) {
    const int grid = grid_for(options, launch.tokens, sms);
    for (int r = 0; r < N; ++r) launch_rank<N>(options, ws, launch, r, grid, streams[r]);
  }
  wait_or_time_out(streams, options.timeout_s);
  const int64_t mismatches = count_mismatches(options, launches);
  if (mismatches > 0) {
    std::printf("harness: %lld mismatched values\n", static_cast<long long>(mismatches));
    return 1;
  }
  std::printf("harness: ok ranks=%d kernel=%s launches=%zu hidden=%d\n", N,
              options.kernel == Kernel::kTwoShot ? "twoshot" : "oneshot", launches.size(),
              options.hidden);
  return 0;
}

int main(int argc, char** argv) {
  std::printf("\"native_source_sha256\": \"%s\"\n", FAULTS_SOURCE_DIGEST);
  std::fflush(stdout);
  const Options options = parse(argc, argv);
  // One hardware queue a rank's stream at least, so no rank waits behind another's launch.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int status = 0;
  switch (options.ranks) {
    case 2: status = run<2>(options); break;
    case 4: status = run<4>(options); break;
    default: status = run<8>(options); break;
  }
  std::fflush(stdout);
  return status;
}
