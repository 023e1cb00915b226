// matvec/matmul over any weight type. Rows are decoded (by the type's decoder, core/quant_*)
// chunk by chunk into an f32 tile in L1 and dotted with SIMD; a tile is decoded once per
// call and reused for all n input rows, so prefill (n > 1) reads and decodes each weight once.
#include "core/weight.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "core/thread_pool.h"

namespace ds4 {

int64_t WeightMatrix::row_stride_bytes() const { return row_bytes(type, cols); }

void dequantize_row(const WeightMatrix& w, int64_t r, float* out) {
  row_decoder(w.type, simd_level())(w, r, 0, w.cols, out);
}

void matvec(const WeightMatrix& w, const float* x, float* y, ThreadPool* pool) { matmul(w, x, 1, y, pool); }

namespace {

// Work unit: 4 rows x 1024 columns. The decoded 16 KB stays in L1 while every input row
// of the batch is dotted against it, so each weight byte is read and decoded once per
// call, whatever n is. Row sums accumulate chunk by chunk in the same order for every n,
// which keeps matvec and batched matmul bit-identical (batch invariance).
constexpr int64_t kTileRows = 4;
constexpr int64_t kChunkCols = 1024;  // a multiple of every block size and MLX group

void tile(const WeightMatrix& w, RowDecodeFn decode, int64_t r0, const float* x, int64_t n, float* y, float* buf) {
  const int64_t rows = std::min(kTileRows, w.rows - r0), cols = w.cols;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) y[t * w.rows + r0 + r] = 0;
  for (int64_t c0 = 0; c0 < cols; c0 += kChunkCols) {
    const int64_t len = std::min(kChunkCols, cols - c0);
    const float* wr[kTileRows] = {};
    for (int64_t r = 0; r < kTileRows; ++r) {
      if (r >= rows) {
        wr[r] = wr[0];  // padding rows: computed, never stored
      } else if (w.type == DType::F32) {
        wr[r] = static_cast<const float*>(w.data) + (r0 + r) * cols + c0;
      } else {
        decode(w, r0 + r, c0, len, buf + r * kChunkCols);
        wr[r] = buf + r * kChunkCols;
      }
    }
    int64_t t = 0;
    for (; t + 2 <= n; t += 2) {  // token pairs: each weight load feeds two FMAs
      float part[8];
      dot4x2_f32(wr, x + t * cols + c0, x + (t + 1) * cols + c0, len, part);
      for (int64_t r = 0; r < rows; ++r) y[t * w.rows + r0 + r] += part[r], y[(t + 1) * w.rows + r0 + r] += part[4 + r];
    }
    for (; t < n; ++t) {
      float part[4];
      dot4_f32(wr[0], wr[1], wr[2], wr[3], x + t * cols + c0, len, part);
      for (int64_t r = 0; r < rows; ++r) y[t * w.rows + r0 + r] += part[r];
    }
  }
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  const RowDecodeFn decode = row_decoder(w.type, simd_level());
  if (kChunkCols % decode_granularity(w) != 0)  // also validates MLX group geometry
    throw Error("matmul: block of " + std::to_string(decode_granularity(w)) + " does not divide the column chunk");
  const int64_t n_tiles = (w.rows + kTileRows - 1) / kTileRows;
  parallel_for(pool, n_tiles, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(size_t(kTileRows * kChunkCols));
    for (int64_t ti = begin; ti < end; ++ti) tile(w, decode, ti * kTileRows, x, n, y, buf.data());
  }, 4);
}

}  // namespace ds4
