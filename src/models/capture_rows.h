#pragma once
// Row arithmetic of captured-prefix commits (speculative decoding, models/draft_head.h),
// shared by every family: after a verify window of n rows ran once, keeping its first
// `keep` rows only needs these copies, never a second forward.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace ds4 {

// A fixed-size history (conv window, sliding KV window, ring) after `keep` more rows: the
// last `rows_out` rows of [old ; in[0..keep)], all {rows, width} row-major.
inline void tail_rows(const std::vector<float>& old, const std::vector<float>& in, int64_t keep, int64_t width,
                      int64_t rows_out, std::vector<float>& out) {
  DS4_CHECK(int64_t(in.size()) >= keep * width && rows_out >= 0, "capture: tail_rows out of range");
  std::vector<float> all(old);
  all.insert(all.end(), in.begin(), in.begin() + keep * width);
  DS4_CHECK(int64_t(all.size()) >= rows_out * width, "capture: tail_rows wants more rows than it has");
  out.assign(all.end() - rows_out * width, all.end());
}
// The same with as many rows as `old` holds (histories that are always full).
inline void tail_rows(const std::vector<float>& old, const std::vector<float>& in, int64_t keep, int64_t width,
                      std::vector<float>& out) {
  tail_rows(old, in, keep, width, width ? int64_t(old.size()) / width : 0, out);
}

// The checks every family's commit_prefix makes: a captured window of n rows is pending and
// 1 <= keep <= n.
inline void check_commit_keep(const char* family, int64_t n, int64_t keep) {
  if (n == 0) throw Error(std::string(family) + ": commit_prefix without a captured verify window");
  if (keep < 1 || keep > n)
    throw Error(std::string(family) + ": commit_prefix keeps " + std::to_string(keep) + " of " + std::to_string(n) +
                " rows");
}

// A draft head's queue of (trunk row, next token) pairs after a verify window of which the
// last `drop` rows are dropped: forward() queued one pair per verified row after the first
// (plus the pair of the previous last row), so the last `drop` pairs go, and the first of
// them holds the trunk row of the last kept token, which becomes `last_row`. rows {P, width}.
inline void drop_pending_pairs(std::vector<float>& rows, std::vector<int32_t>& next, std::vector<float>& last_row,
                               int64_t width, int64_t drop, const char* family) {
  const int64_t P = int64_t(next.size());
  if (drop <= 0) return;
  if (P < drop || int64_t(rows.size()) != P * width)
    throw Error(std::string(family) + ": commit_prefix: draft-head pending rows out of step");
  last_row.assign(rows.begin() + (P - drop) * width, rows.begin() + (P - drop + 1) * width);
  rows.resize(size_t((P - drop) * width));
  next.resize(size_t(P - drop));
}

}  // namespace ds4
