// Generic matvec/matmul over any weight type: rows are dequantized one at a time into an
// f32 scratch row and dotted in f32. Block formats plug their row decoder into
// dequantize_row (core/quant_*.cpp); SIMD dot paths may replace this per type.
#include "core/weight.h"

#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace ds4 {

int64_t WeightMatrix::row_stride_bytes() const {
  if (type == DType::MLX_Q4 || type == DType::MLX_Q8) return row_bytes(type, cols);
  return row_bytes(type, cols);
}

void dequantize_row_blocks(const WeightMatrix& w, int64_t r, float* out);  // quant formats (foundation)

void dequantize_row(const WeightMatrix& w, int64_t r, float* out) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.row_stride_bytes();
  switch (w.type) {
    case DType::F32: {
      const float* p = reinterpret_cast<const float*>(row);
      for (int64_t i = 0; i < w.cols; ++i) out[i] = p[i];
      return;
    }
    case DType::F16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < w.cols; ++i) out[i] = f16_to_f32(p[i]);
      return;
    }
    case DType::BF16: {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < w.cols; ++i) out[i] = bf16_to_f32(p[i]);
      return;
    }
    default:
      dequantize_row_blocks(w, r, out);
  }
}

static float dot_f32(const float* a, const float* b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void matvec(const WeightMatrix& w, const float* x, float* y, ThreadPool* pool) {
  matmul(w, x, 1, y, pool);
}

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  parallel_for(pool, w.rows, [&](int64_t begin, int64_t end) {
    std::vector<float> row(size_t(w.cols));
    for (int64_t r = begin; r < end; ++r) {
      const float* wr;
      if (w.type == DType::F32) {
        wr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(w.data) + r * w.cols * 4);
      } else {
        dequantize_row(w, r, row.data());
        wr = row.data();
      }
      for (int64_t t = 0; t < n; ++t) y[t * w.rows + r] = dot_f32(wr, x + t * w.cols, w.cols);
    }
  }, 16);
}

}  // namespace ds4
