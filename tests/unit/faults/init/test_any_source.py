"""init never falls over: on any source Hypothesis makes of CUDA's ordering
statements (volatile flags with and without fences, atomics of every scope,
barriers under conditions, spin loops, inline-PTX helpers of any length),
with or without spellings, scan -> propose -> starter -> harness end in a
catalog or in init's own one-line error, never a traceback. A 6-line kernel
with a volatile store and no fence crashed it (issue 49)."""

from __future__ import annotations

import tomllib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faults.init import (
    CONTRACT_KEYS,
    InitError,
    harness_skeleton,
    propose,
    scan,
    starter_catalog,
    undeclared,
)

STATEMENTS = [
    "data[threadIdx.x] = 1;",
    "*flag = 1;",
    "flag[blockIdx.x] = epoch;",
    "__threadfence();",
    "__threadfence_system();",
    "__threadfence_block();",
    "__syncthreads();",
    "__syncwarp();",
    "atomicAdd(counter, 1);",
    "atomicAdd_system(counter, 1);",
    "atomicExch(flag, 1);",
    "atomicCAS(flag, 0, 1);",
    "while (*flag != epoch) {}",
    "while (atomicAdd(counter, 0) < n) { }",
    "int v = *flag;",
    "st_flag_release(flag, 1);",
    "while (ld_flag_acquire(flag) < epoch) {}",
    'asm volatile("fence.acq_rel.sys;" ::: "memory");',
    'asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(flag), "r"(1) : "memory");',
    "cuda::atomic_ref<int, cuda::thread_scope_system>(*flag).store(1, cuda::memory_order_release);",
    "cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_device);",
    "if (threadIdx.x == 0) {",
    "if (blockIdx.x == 0) {",
    "for (int i = threadIdx.x; i < n; i += blockDim.x) {",
    "}",
    "return;",
    "// a comment with __syncthreads() in it",
    '"a string with atomicAdd(" ;',
]

HELPER = """\
__device__ __forceinline__ void st_flag_release(int* p, int v) {
%s  asm volatile("st.release.sys.global.u32 [%%0], %%1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int ld_flag_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.sys.global.u32 %%0, [%%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
"""

SPELLINGS = st.dictionaries(
    st.sampled_from(sorted(CONTRACT_KEYS)),
    st.sampled_from(["st_flag_release", "ld_flag_acquire", "__syncthreads", "my_barrier",
                     "atomicAdd", "__threadfence"]),
    max_size=3,
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.lists(st.sampled_from(STATEMENTS), max_size=14),
    padding=st.integers(0, 14),  # a helper's length: any, past the old 12-line limit too
    spellings=SPELLINGS,
    single_file=st.booleans(),
)
def test_init_ends_in_a_catalog_or_its_own_error_on_any_source(
    tmp_path_factory, body, padding, spellings, single_file
):
    root = tmp_path_factory.mktemp("src")
    kernel = "__global__ void k(volatile int* flag, int* data, int* counter, int epoch, int n) {\n"
    kernel += "".join(f"  {line}\n" for line in body) + "}\n"
    (root / "helpers.cuh").write_text(HELPER % ("  // padding\n" * padding))
    (root / "k.cu").write_text('#include "helpers.cuh"\n' + kernel)
    sources = root / "k.cu" if single_file else root
    try:
        found = scan(sources, spellings)
        proposals, skipped = undeclared(found, propose(found))
        catalog = starter_catalog(found, proposals, "target", "src", "afdep-faults", skipped)
        harness_skeleton("target", next(iter(found.files), ""), "afdep-faults")
    except InitError as error:  # init's own refusal: one line
        assert "\n" not in str(error)
        return
    tomllib.loads(catalog)  # whatever it proposes is TOML
