// Fixed-width types and bf16 conversions, with no CUDA headers: NVRTC compiles
// afdep on machines with no toolkit, and every byte that builds a kernel lies
// under afdep/csrc, so the source digest covers it.
#pragma once

namespace afdep {

using i32 = int;
using u32 = unsigned int;
using i64 = long long;
using u64 = unsigned long long;
using u16 = unsigned short;
using u8 = unsigned char;

// The bits of a bf16 value; arithmetic happens in fp32.
struct alignas(2) bf16 {
  u16 bits;
};

__device__ __forceinline__ float bf16_to_float(u16 bits) {
  return __uint_as_float(static_cast<u32>(bits) << 16);
}

template <typename T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

}  // namespace afdep
