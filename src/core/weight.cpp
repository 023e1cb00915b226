// matvec/matmul over any weight type. Rows are decoded (by the type's decoder, core/quant_*)
// into an f32 tile in cache and dotted with SIMD; a tile of rows is decoded once per call
// and reused for all n input rows, so prefill (n > 1) reads and decodes each weight once.
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

// Rows per decoded tile: ~128 KB of f32 (stays in L2 while all n inputs stream past it),
// a multiple of 4 for the 4-row dot kernel.
int64_t tile_rows(int64_t cols) { return std::clamp<int64_t>((32768 / std::max<int64_t>(cols, 1)) & ~int64_t(3), 4, 64); }

// Y[t, r] for rows [r0, r1) and all n inputs, from a decoded tile {r1-r0, cols}.
void tile_dots(const float* tile, int64_t r0, int64_t r1, int64_t cols, const float* x, int64_t n, int64_t rows,
               float* y) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * cols;
    float* yt = y + t * rows;
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
      const float* wr = tile + (r - r0) * cols;
      dot4_f32(wr, wr + cols, wr + 2 * cols, wr + 3 * cols, xt, cols, yt + r);
    }
    for (; r < r1; ++r) yt[r] = dot_f32(tile + (r - r0) * cols, xt, cols);
  }
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  const RowDecodeFn decode = row_decoder(w.type, simd_level());
  decode_granularity(w);  // validates MLX group geometry before any decoding
  const int64_t cols = w.cols;
  if (w.type == DType::F32) {  // no decode needed: dot straight from the weights
    parallel_for(pool, w.rows, [&](int64_t begin, int64_t end) {
      tile_dots(static_cast<const float*>(w.data) + begin * cols, begin, end, cols, x, n, w.rows, y);
    }, 16);
    return;
  }
  const int64_t tr = tile_rows(cols);
  const int64_t n_tiles = (w.rows + tr - 1) / tr;
  parallel_for(pool, n_tiles, [&](int64_t begin, int64_t end) {
    std::vector<float> tile(size_t(tr * cols));
    for (int64_t ti = begin; ti < end; ++ti) {
      const int64_t r0 = ti * tr, r1 = std::min(w.rows, r0 + tr);
      for (int64_t r = r0; r < r1; ++r) decode(w, r, 0, cols, tile.data() + (r - r0) * cols);
      tile_dots(tile.data(), r0, r1, cols, x, n, w.rows, y);
    }
  }, 1);
}

}  // namespace ds4
