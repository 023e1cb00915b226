#pragma once
// Row bookkeeping of a forward over several sequences' windows stacked (decode_batch: one
// row each; verify_batch: ragged verify windows), shared by every CPU family.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "models/model.h"

namespace ds4 {

// first[i] = the first row of window i in the stack, first[windows.size()] = all rows.
inline std::vector<int64_t> window_starts(std::span<const std::span<const int32_t>> windows) {
  std::vector<int64_t> first(windows.size() + 1, 0);
  for (size_t i = 0; i < windows.size(); ++i) first[i + 1] = first[i] + int64_t(windows[i].size());
  return first;
}

// The stacked rows that get logits: every row (kAll), each window's last row (kLast), none.
inline std::vector<int64_t> logit_rows(const std::vector<int64_t>& first, Logits mode) {
  std::vector<int64_t> rows;
  if (mode == Logits::kAll)
    for (int64_t r = 0; r < first.back(); ++r) rows.push_back(r);
  else if (mode == Logits::kLast)
    for (size_t i = 0; i + 1 < first.size(); ++i) rows.push_back(first[i + 1] - 1);
  return rows;
}

// dst {rows.size(), width} = src's rows `rows` (src {*, width}).
inline void gather_rows(const float* src, std::span<const int64_t> rows, int64_t width, float* dst) {
  for (size_t i = 0; i < rows.size(); ++i) std::copy_n(src + rows[i] * width, width, dst + int64_t(i) * width);
}

// decode_batch's one-token windows over `tokens`.
inline std::vector<std::span<const int32_t>> one_token_windows(std::span<const int32_t> tokens) {
  std::vector<std::span<const int32_t>> w;
  for (size_t i = 0; i < tokens.size(); ++i) w.push_back(tokens.subspan(i, 1));
  return w;
}

}  // namespace ds4
