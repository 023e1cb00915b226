#pragma once
// The GemvRows of moe_group's entries (moe_group.h), one place for what the three models'
// chunk MoE (models/*/cuda/chunk.cu) derive from a grouping: the entries count and index stride
// follow g.group_stride, so a launch cannot read the entries at another stride than they were
// written with.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backend/cuda/gemv.h"
#include "backend/cuda/moe_group.h"

namespace ds4::cuda {

// Entries of `rows` rows' k pairs over `experts`, grouped by moe_group into g: each reads up to
// min(max_rows, g.group_stride) of its rows (max_rows: how many one expert can get, `rows` for a
// top-k router, rows * k where a row may name an expert twice), on expert ids g.experts that lie
// expert_stride (scale_stride: MLX scales / biases) bytes apart. x_row / x_idx / y_row / y_idx are
// the caller's (per product).
inline GemvRows moe_group_rows(const MoeGroup& g, int64_t rows, int64_t k, int64_t experts, int64_t max_rows,
                               size_t expert_stride, size_t scale_stride = 0) {
  GemvRows r;
  r.n = int(std::min<int64_t>(max_rows, g.group_stride));
  r.idx_stride = int(g.group_stride);
  r.batch = GemvBatch{int(moe_group_entries(rows, k, experts, g.group_stride)), g.experts, expert_stride,
                      scale_stride, 0, 0};
  r.live = g.live, r.counts = g.counts;
  return r;
}

}  // namespace ds4::cuda
