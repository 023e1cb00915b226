#pragma once
// Builds one decoder body three times: plain, AVX2 and AVX-512 (the compiler vectorizes
// the same loop for each target), so the paths cannot drift apart.
#include "core/quant.h"

#define DS4_DECODER_VARIANTS(prefix, body)                                                                    \
  [[maybe_unused]] static void prefix##_scalar(const ::ds4::WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out) { \
    body(w, r, c0, len, out);                                                                                 \
  }                                                                                                           \
  [[maybe_unused]] DS4_TARGET_AVX2 static void prefix##_avx2(const ::ds4::WeightMatrix& w, int64_t r, int64_t c0, int64_t len, \
                                            float* out) {                                                     \
    body(w, r, c0, len, out);                                                                                 \
  }                                                                                                           \
  [[maybe_unused]] DS4_TARGET_AVX512 static void prefix##_avx512(const ::ds4::WeightMatrix& w, int64_t r, int64_t c0,          \
                                                int64_t len, float* out) {                                    \
    body(w, r, c0, len, out);                                                                                 \
  }                                                                                                           \
  [[maybe_unused]] static ::ds4::RowDecodeFn prefix##_pick(::ds4::SimdLevel l) {                                               \
    return l == ::ds4::SimdLevel::Avx512 ? prefix##_avx512 : l == ::ds4::SimdLevel::Avx2 ? prefix##_avx2      \
                                                                                         : prefix##_scalar;   \
  }

#define DS4_ALWAYS_INLINE inline __attribute__((always_inline))

namespace ds4 {
inline const uint8_t* row_ptr(const WeightMatrix& w, int64_t r) {
  return static_cast<const uint8_t*>(w.data) + r * w.row_stride_bytes();
}
}  // namespace ds4
