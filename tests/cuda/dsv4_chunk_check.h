#pragma once
// The CUDA DeepSeek V4 tests' chunk check (test_deepseek_v4_cuda item 6, test_deepseek_v4_actq_cuda):
// a multi-row forward against as many one-token decode steps, BIT-IDENTICAL.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "models/model.h"
#include "test_common.h"

namespace ds4::cuda_test {

// First element where two logits blocks {rows, V} differ, as "row r (position p), logit v:
// a vs b"; "" when equal.
inline std::string first_difference(const std::vector<float>& a, const std::vector<float>& b, int64_t V, int64_t pos0) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "first at row %lld (position %lld), logit %lld: %.9g vs %.9g", (long long)(i / V),
                    (long long)(pos0 + int64_t(i) / V), (long long)(int64_t(i) % V), double(a[i]), double(b[i]));
      return buf;
    }
  return "";
}

// chunked (a chunk_rows > 1 model) vs steps (chunk_rows 1): after the same `prefix` tokens (one
// decode step each, in both), a forward of T rows must give bit-identical kAll rows, kLast = the
// kAll last row, and 4 more decode steps must stay identical (the states are the same).
inline void chunk_vs_steps(Model& chunked, Model& steps, const std::vector<int32_t>& tokens, int64_t prefix,
                    const std::vector<int64_t>& lengths, const std::string& name) {
  const int64_t V = chunked.info().vocab_size;
  for (int64_t T : lengths) {
    const std::span<const int32_t> pre(tokens.data(), size_t(prefix)), rows(tokens.data() + prefix, size_t(T));
    auto one_by_one = [&](Model& m, ModelState& st) {
      std::vector<float> none;
      for (int32_t tok : pre) m.forward(st, std::span<const int32_t>(&tok, 1), Logits::kNone, none);
    };
    auto sa = chunked.new_state(), sb = steps.new_state(), sc = chunked.new_state();
    one_by_one(chunked, *sa), one_by_one(steps, *sb), one_by_one(chunked, *sc);
    std::vector<float> a, b, last;
    chunked.forward(*sa, rows, Logits::kAll, a);
    steps.forward(*sb, rows, Logits::kAll, b);
    const float d = a.size() == b.size() ? max_diff(a.data(), b.data(), a.size()) : INFINITY;
    const std::string where = first_difference(a, b, V, prefix);
    chunked.forward(*sc, rows, Logits::kLast, last);
    const bool last_ok = a.size() == size_t(T * V) && last.size() == size_t(V) &&
                         std::equal(last.begin(), last.end(), a.end() - V);
    std::string cont;
    for (int i = 0; i < 4 && cont.empty(); ++i) {
      const int32_t next = tokens[size_t((prefix + T + i * 31) % int64_t(tokens.size()))];
      a = chunked.decode(*sa, next);
      b = steps.decode(*sb, next);
      cont = first_difference(a, b, V, prefix + T + i);
    }
    char buf[600];
    std::snprintf(buf, sizeof buf,
                  "%s: forward of %lld rows after %lld tokens vs %lld decode steps: kAll max |diff| %.3g (must be 0%s%s), "
                  "kLast = kAll last row: %s, 4 decode steps after: %s%s",
                  name.c_str(), (long long)T, (long long)prefix, (long long)T, double(d), where.empty() ? "" : "; ",
                  where.c_str(), last_ok ? "yes" : "NO", cont.empty() ? "identical" : "DIFFER, ", cont.c_str());
    check(where.empty() && last_ok && cont.empty(), buf);
  }
}

}  // namespace ds4::cuda_test
