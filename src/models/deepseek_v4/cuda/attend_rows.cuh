#pragma once
// What one query row of attend() sees (attention.cu, attention_tc.cu): its key rows in
// key_row() order (window ring oldest first, then the compressed entries: every closed one, or
// the indexer's selection), and its own per-row buffers within a chunk (or, in a decode batch,
// its own sequence's state).
#include <cuda_runtime.h>

#include <cstdint>

#include "models/deepseek_v4/cuda/kernels.h"
#include "models/deepseek_v4/cuda/seq_rows.cuh"

namespace ds4::deepseek_v4::cuda::detail {

__device__ __forceinline__ const float* key_row(const AttendArgs& a, int64_t r, int64_t n_win, int64_t p) {
  if (r < n_win) return a.ring + ((p - n_win + 1 + r) % a.ring_rows) * a.hd;
  const int64_t k = r - n_win;
  return a.entries + (a.sel ? int64_t(a.sel[k]) : k) * a.hd;
}

__device__ __forceinline__ int64_t visible_rows(const AttendArgs& a, int64_t p, int64_t& n_win) {
  n_win = p + 1 < a.window ? p + 1 : a.window;
  int64_t n_comp = 0;
  if (a.ratio > 0) n_comp = a.sel ? int64_t(*a.nsel) : (p + 1) / a.ratio;
  const int64_t rows = n_win + n_comp;
  return rows < a.max_rows ? rows : a.max_rows;  // sized for max_ctx; never clipped within it
}

// Row t of a chunk: its own query, selection, partials and output (Rows::stride floats apart),
// and in a decode batch its own sequence's ring and entries (Rows::shift); returns its position.
__device__ __forceinline__ int64_t to_row(AttendArgs& a, int64_t t, const Rows& r, const int32_t* pos) {
  const int64_t o = t * r.stride, b = row_shift(r, t);
  a.q += o, a.part += o, a.part_ml += o, a.out += o;
  if (a.sel) a.sel += o, a.nsel += o;
  a.ring = shifted(a.ring, b), a.entries = shifted(a.entries, b);
  return row_position(pos, r, t);
}

}  // namespace ds4::deepseek_v4::cuda::detail
