#pragma once
// Device side of Rows::shift (kernels.h): the rows of a decode batch, one token of each of
// several sequences, each with its own state buffer and position counter.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/seq_rows.cuh"
#include "models/deepseek_v4/cuda/kernels.h"

namespace ds4::deepseek_v4::cuda::detail {

// Bytes from row 0's state buffer to row t's (0 for one sequence).
__device__ __forceinline__ int64_t row_shift(const Rows& r, int64_t t) {
  return r.shift ? r.shift[t * r.shift_stride] : 0;
}

using ds4::cuda::detail::shifted;  // (backend/cuda/seq_rows.cuh)

// Row t's position: its own sequence's counter (several sequences), or *pos + t (one sequence's
// consecutive tokens).
__device__ __forceinline__ int64_t row_position(const int32_t* pos, const Rows& r, int64_t t) {
  return r.shift ? int64_t(*shifted(pos, row_shift(r, t))) : int64_t(*pos) + t;
}

}  // namespace ds4::deepseek_v4::cuda::detail
