#pragma once
// after_value: a compute-order device for kernels that must keep few values live (the same bits):
// gemv.cu's wide gemv_rows forms and Qwen's fused hyper read over rows.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ds4::cuda::gemv_detail {

// v's 32-bit words made to depend on `after` (each OR'd with its bits AND `zero`, which is 0 at
// run time but unknown to the compiler and ptxas): what is computed from v afterwards waits for
// `after` and is computed again, not hoisted or reused from before. The same words, the same bits.
template <class T>
__device__ __forceinline__ void after_value(T& v, float after, uint32_t zero) {
  static_assert(sizeof(T) % 4 == 0 && std::is_trivially_copyable_v<T>);
  uint32_t w[sizeof(T) / 4];
  memcpy(w, &v, sizeof(T));
  const uint32_t dep = __float_as_uint(after) & zero;
#pragma unroll
  for (int k = 0; k < int(sizeof(T) / 4); ++k) w[k] |= dep;
  memcpy(&v, w, sizeof(T));
}

}  // namespace ds4::cuda::gemv_detail
