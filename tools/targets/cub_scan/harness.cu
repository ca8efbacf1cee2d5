// Our harness for CUB's single-pass scan (docs/targets.md, "CUB's decoupled
// look-back"): cub::DispatchScan's inclusive scan on one GPU. Each tile of the
// input is a block; its prefix comes from the decoupled look-back (a tile
// publishes its aggregate, then its inclusive prefix, with a status word; the
// tiles after it wait for that status and read the value), so the blocks of
// one launch synchronize with each other through global memory. Every output
// is checked bit for bit against the host's prefix.
//
//   harness --type wide|word [--items N...] [--steps S] [--seed K] [--timeout-s SECONDS]
//
// wide: a 16-byte value, whose tile state keeps the status and the value
//   apart (ScanTileState<T, false>: the value stored, then the status
//   released; the wait loads the status, fences, then loads the value);
// word: a 4-byte value packed with its status in one 8-byte word (the data
//   is its own flag: no release or acquire orders it).
//
// The headers are fetched from the package registry into a workspace
// (python -m tools.targets.fetch cub_scan --into WS), never copied here; build
// it with
//   nvcc -arch=sm_90a -std=c++17 -O2 -I WS/include -DFAULTS_SOURCE_DIGEST="\"<digest>\"" harness.cu
//
// What it prints (the catalog's [target.log] reads them):
//   "native_source_sha256": "<digest>"            first, so a hung run has it too
//   Mismatched type=<t> step=<s> items=<n> index=<i> got=<g> want=<w>   (8 at most)
//   faults timeout: site=harness                  the host's deadline passed
//   CUDA error: <name>: <text>                    a CUDA call failed
//   harness: ok ...                               every output matched (exit 0)
#include <cuda_runtime.h>

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

// What code the fault engine injects into the headers may call (the
// catalog's clock and rank): defined before them, so every site sees them.
__device__ __forceinline__ unsigned long long faults_globaltimer() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}
// One GPU, one process: every block is rank 0's.
__device__ __forceinline__ int faults_rank() { return 0; }

#include <cub/device/dispatch/dispatch_scan.cuh>

namespace {

// A 16-byte value: not primitive, so its tile status and value live apart.
struct Wide {
  unsigned long long low;
  unsigned long long high;
};

struct WideSum {
  __host__ __device__ Wide operator()(const Wide& x, const Wide& y) const {
    return Wide{x.low + y.low, x.high + y.high};  // associative: any grouping, one sum
  }
};

struct WordSum {
  __host__ __device__ unsigned int operator()(unsigned int x, unsigned int y) const {
    return x + y;
  }
};

bool same(const Wide& x, const Wide& y) { return x.low == y.low && x.high == y.high; }
bool same(unsigned int x, unsigned int y) { return x == y; }
std::string text(const Wide& x) {
  char out[48];
  std::snprintf(out, sizeof out, "(%llu,%llu)", x.low, x.high);
  return out;
}
std::string text(unsigned int x) { return std::to_string(x); }

// The value at `index` of step `step`: every step's inputs differ, so a value
// left by an earlier launch never passes for this one's.
unsigned long long mix(unsigned long long x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}
void fill(std::vector<Wide>& in, unsigned long long seed, int step) {
  for (size_t i = 0; i < in.size(); ++i) {
    unsigned long long h = mix(seed * 1000003ULL + step * 7919ULL + i);
    in[i] = Wide{h & 0xffff, h >> 16};
  }
}
void fill(std::vector<unsigned int>& in, unsigned long long seed, int step) {
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = static_cast<unsigned int>(mix(seed * 1000003ULL + step * 7919ULL + i) & 0xffff);
  }
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::printf("CUDA error: %s: %s (%s)\n", cudaGetErrorName(status), cudaGetErrorString(status),
                what);
    std::fflush(stdout);
    std::exit(1);
  }
}

// Waits for `stream` until `deadline`; past it the run ends naming the
// harness (a wait that never returns inside a kernel; a bounded site says its
// own name first).
void wait_for(cudaStream_t stream, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) check(status, "the scan");
    if (std::chrono::steady_clock::now() > deadline) {
      std::printf("faults timeout: site=harness rank=0\n");
      std::fflush(stdout);
      std::_Exit(3);  // the context goes with the process: no kernel outlives it
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

struct Options {
  std::string type = "wide";
  std::vector<int> items = {1, 3000, 200000, 4000000};
  int steps = 3;
  unsigned long long seed = 1;
  double timeout_s = 30;
};

// Scans every size `steps` times; the mismatches found (8 printed at most).
template <typename T, typename Op>
int run(const Options& options, const char* type) {
  using Dispatch = cub::DispatchScan<const T*, T*, Op, cub::NullType, int>;
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "a stream");
  int mismatches = 0, launches = 0;
  for (int items : options.items) {
    std::vector<T> in(items), out(items), want(items);
    T *d_in = nullptr, *d_out = nullptr;
    check(cudaMalloc(&d_in, items * sizeof(T)), "the input");
    check(cudaMalloc(&d_out, items * sizeof(T)), "the output");
    size_t temp_bytes = 0;
    check(Dispatch::Dispatch(nullptr, temp_bytes, d_in, d_out, Op{}, cub::NullType{}, items, stream),
          "the temporary storage's size");
    void* d_temp = nullptr;
    check(cudaMalloc(&d_temp, temp_bytes), "the temporary storage");
    for (int step = 0; step < options.steps; ++step, ++launches) {
      fill(in, options.seed, step + 100 * launches);
      want[0] = in[0];
      for (int i = 1; i < items; ++i) want[i] = Op{}(want[i - 1], in[i]);
      check(cudaMemcpyAsync(d_in, in.data(), items * sizeof(T), cudaMemcpyHostToDevice, stream),
            "the input");
      // Every byte the launch may read before it writes it is poisoned: a tile
      // value read without its wait is never the last launch's right one.
      check(cudaMemsetAsync(d_out, 0xa5, items * sizeof(T), stream), "the output");
      check(cudaMemsetAsync(d_temp, 0x5a, temp_bytes, stream), "the temporary storage");
      auto deadline = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
      check(Dispatch::Dispatch(d_temp, temp_bytes, d_in, d_out, Op{}, cub::NullType{}, items,
                               stream),
            "the scan");
      wait_for(stream, deadline);
      check(cudaMemcpy(out.data(), d_out, items * sizeof(T), cudaMemcpyDeviceToHost), "output");
      for (int i = 0; i < items; ++i) {
        if (same(out[i], want[i])) continue;
        if (mismatches++ < 8) {
          std::printf("Mismatched type=%s step=%d items=%d index=%d got=%s want=%s\n", type, step,
                      items, i, text(out[i]).c_str(), text(want[i]).c_str());
        }
      }
    }
    check(cudaFree(d_temp), "free");
    check(cudaFree(d_out), "free");
    check(cudaFree(d_in), "free");
  }
  check(cudaStreamDestroy(stream), "a stream");
  if (mismatches == 0) {
    std::printf("harness: ok type=%s launches=%d sizes=%zu\n", type, launches,
                options.items.size());
  }
  return mismatches;
}

void usage(const char* why) {
  std::fprintf(stderr,
               "harness: error: %s\nusage: harness --type wide|word [--items N...] [--steps S] "
               "[--seed K] [--timeout-s SECONDS]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* name) {
      if (i + 1 >= argc) usage((std::string(name) + ": needs a value").c_str());
      return std::string(argv[++i]);
    };
    if (arg == "--type") {
      options.type = value("--type");
      if (options.type != "wide" && options.type != "word") usage("--type: wide or word");
    } else if (arg == "--items") {
      options.items.clear();
      while (i + 1 < argc && argv[i + 1][0] != '-') {
        int items = std::atoi(argv[++i]);
        if (items < 1) usage("--items: each a count of at least 1");
        options.items.push_back(items);
      }
      if (options.items.empty()) usage("--items: needs at least one count");
    } else if (arg == "--steps") {
      options.steps = std::atoi(value("--steps").c_str());
      if (options.steps < 1) usage("--steps: at least 1");
    } else if (arg == "--seed") {
      options.seed = std::strtoull(value("--seed").c_str(), nullptr, 10);
    } else if (arg == "--timeout-s") {
      options.timeout_s = std::atof(value("--timeout-s").c_str());
      if (options.timeout_s <= 0) usage("--timeout-s: a positive number of seconds");
    } else {
      usage(("unknown argument " + arg).c_str());
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("\"native_source_sha256\": \"%s\"\n", FAULTS_SOURCE_DIGEST);
  std::fflush(stdout);
  Options options = parse(argc, argv);
  int mismatches = options.type == "wide" ? run<Wide, WideSum>(options, "wide")
                                          : run<unsigned int, WordSum>(options, "word");
  std::fflush(stdout);
  return mismatches == 0 ? 0 : 1;
}
