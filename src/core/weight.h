#pragma once
// A weight matrix as the kernels see it: row-major [rows x cols], every row stored in
// `type` along cols. Zero-copy: `data` points into an mmap'd file or an owned buffer.
#include <cstdint>

#include "core/dtype.h"

namespace ds4 {

class ThreadPool;

struct WeightMatrix {
  DType type = DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  // MLX affine only: per (row, group) scale and bias, `scale_type` F16/BF16/F32.
  const void* scales = nullptr;
  const void* biases = nullptr;
  DType scale_type = DType::F16;
  int64_t group_size = 0;

  int64_t row_stride_bytes() const;
};

// y[rows] = W x[cols]; f32 accumulation.
void matvec(const WeightMatrix& w, const float* x, float* y, ThreadPool* pool = nullptr);
// Y[n x rows] = X[n x cols] W^T.
void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool = nullptr);
// out[cols] = row `r` of W in f32.
void dequantize_row(const WeightMatrix& w, int64_t r, float* out);

}  // namespace ds4
