"""The harness skeleton init writes beside its starter catalog: a small CUDA
C++ host program that prints the log-line contract's lines the starter's
[target.log] reads (the digest, a mismatch, a timeout), with TODOs where the
target's kernels are launched, a logical rank on its own stream."""

from __future__ import annotations

# What the skeleton prints, as the starter's [target.log] finds it.
LOG_PATTERNS = {
    "mismatch": "^mismatch: ",
    "timeout": "^timeout: site=",
    "assertion": "^assertion failed: ",
    "device_error": "CUDA error: |cudaError[A-Z][A-Za-z]+",
    "digest": '^"native_source_sha256": "([0-9a-f]{64})"$',
}

SKELETON = r"""// The harness of {name}: written by `{program} init` as a skeleton
// (docs/tools.md, "Onboarding a codebase"). It runs every logical rank of the
// target on one GPU, each on its own stream, and prints the lines the
// catalog's [target.log] reads: the digest, a mismatch, a timeout.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// TODO: include the target's sources, e.g. #include "{first_file}"

#ifndef SOURCE_DIGEST  // the build passes the tree's digest: -DSOURCE_DIGEST="{{digest}}"
#define SOURCE_DIGEST "unknown"
#endif

#define CHECK(call)                                                          \
  do {{                                                                       \
    cudaError_t status_ = (call);                                            \
    if (status_ != cudaSuccess) {{                                            \
      std::printf("CUDA error: %s (%s:%d)\n", cudaGetErrorString(status_),   \
                  __FILE__, __LINE__);                                       \
      return 1;                                                              \
    }}                                                                        \
  }} while (0)

int main(int argc, char** argv) {{
  int ranks = 2;
  double timeout_s = 10.0;  // a wait that never ends is a timeout, not a hang
  for (int i = 1; i + 1 < argc; i += 2) {{
    if (!std::strcmp(argv[i], "--ranks")) ranks = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--timeout-s")) timeout_s = std::atof(argv[i + 1]);
  }}
  std::printf("\"native_source_sha256\": \"%s\"\n", SOURCE_DIGEST);

  std::vector<cudaStream_t> streams(ranks);
  for (auto& stream : streams) CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // TODO: allocate every rank's buffers in one allocation (a slice per rank,
  // so a rank's peer pointers are plain device pointers), zero its flags and
  // fill its inputs.

  for (int rank = 0; rank < ranks; ++rank) {{
    // TODO: launch rank `rank`'s kernel on streams[rank]. Every rank's blocks
    // must be resident at once (their waits spin on each other): keep each
    // rank's grid small enough that all of them fit on the GPU together.
    (void)rank;
  }}

  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (int rank = 0; rank < ranks; ++rank) {{
    while (cudaStreamQuery(streams[rank]) == cudaErrorNotReady) {{
      if (std::chrono::steady_clock::now() > deadline) {{
        // TODO: name the wait that did not end (a marker the kernel printed).
        std::printf("timeout: site=%s rank=%d\n", "unknown", rank);
        std::fflush(stdout);
        std::_Exit(1);
      }}
    }}
    CHECK(cudaStreamSynchronize(streams[rank]));
  }}

  int mismatches = 0;
  // TODO: compare each rank's output with a reference computed on the host;
  // for each wrong element (print the first few):
  //   std::printf("mismatch: rank=%d index=%zu expected=%g got=%g\n", ...);
  //   ++mismatches;
  std::printf("%s\n", mismatches ? "FAILED" : "ok");
  return mismatches ? 1 : 0;
}}
"""


def harness_skeleton(name: str, first_file: str, program: str = "python -m faults") -> str:
    """The skeleton's C++ text for target `name` (`first_file`: a source to
    include; `program`: the command that wrote it)."""
    return SKELETON.format(name=name, first_file=first_file or "TODO.cuh", program=program)
