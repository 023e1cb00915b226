#pragma once
// Device side of SeqShift (seq_shift.h): row t of a decode batch on its own sequence's state.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/seq_shift.h"

namespace ds4::cuda::detail {

// Bytes from row 0's state to row t's (0 without shifts: one sequence).
__device__ __forceinline__ int64_t seq_shift(const SeqShift& s, int64_t t) { return s.at ? s.at[t * s.stride] : 0; }

// p moved by `bytes` (a state pointer of row 0 -> the same field of another row's state); null stays null.
template <class T>
__device__ __forceinline__ T* shifted(T* p, int64_t bytes) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return p ? reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + bytes) : p;
}

}  // namespace ds4::cuda::detail
