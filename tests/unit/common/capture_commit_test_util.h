#pragma once
// Captured-prefix commit checks shared by every family (models/draft_head.h): after one
// captured verify window of n rows, keeping the first `keep` rows must give the state the
// target reaches by decoding those rows one at a time (AR), at every keep 1..n. States are
// compared through their checkpoint sections (ModelState::save), so every field a family
// persists is covered without a per-family list.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::draft_test {

// Batched rows vs one-row decode differ in summation order only (matmul blocking), so floats
// are compared within kRelTol of the section's largest magnitude (at least 1). 32-bit words
// that are not normal floats (integers: token ids, counts, positions, all small enough to
// read as subnormals or zero) must match exactly; sections whose size is not a multiple of 4
// (flags) too.
inline constexpr float kRelTol = 2e-5f;

inline bool is_plain_float(uint32_t bits) {
  const uint32_t e = (bits >> 23) & 0xffu;
  return e != 0 && e != 0xffu;
}

// "" when every section of `got` equals `want`'s; otherwise the first differences, named.
inline std::string state_mismatch(const ModelState& got, const ModelState& want, float rel_tol = kRelTol) {
  std::vector<StateSection> a, b;
  got.save(a);
  want.save(b);
  if (a.size() != b.size()) return "section count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  std::string out;
  for (size_t i = 0; i < a.size() && out.size() < 2000; ++i) {
    const auto &x = a[i].bytes, &y = b[i].bytes;
    if (a[i].name != b[i].name) return "section " + a[i].name + " vs " + b[i].name;
    if (x.size() != y.size()) {
      out += a[i].name + ": " + std::to_string(x.size()) + " vs " + std::to_string(y.size()) + " bytes; ";
      continue;
    }
    if (x == y) continue;
    if (x.size() % 4) {
      out += a[i].name + ": bytes differ; ";
      continue;
    }
    const size_t n = x.size() / 4;
    std::vector<uint32_t> xb(n), yb(n);
    std::memcpy(xb.data(), x.data(), x.size());
    std::memcpy(yb.data(), y.data(), y.size());
    float scale = 1, worst = 0;
    for (size_t k = 0; k < n; ++k) {
      if (!is_plain_float(yb[k])) continue;
      float v;
      std::memcpy(&v, &yb[k], 4);
      scale = std::max(scale, std::fabs(v));
    }
    bool exact_bad = false;
    for (size_t k = 0; k < n; ++k) {
      if (!is_plain_float(xb[k]) || !is_plain_float(yb[k])) {
        exact_bad |= xb[k] != yb[k] && (xb[k] | yb[k]) != 0x80000000u;  // +0 == -0
        continue;
      }
      float u, v;
      std::memcpy(&u, &xb[k], 4);
      std::memcpy(&v, &yb[k], 4);
      worst = std::max(worst, std::fabs(u - v));
    }
    if (exact_bad) out += a[i].name + ": integer words differ; ";
    if (worst > rel_tol * scale)
      out += a[i].name + ": max |diff| " + std::to_string(worst) + " > " + std::to_string(rel_tol) + " * " +
             std::to_string(scale) + "; ";
  }
  return out;
}

inline float max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float worst = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i])), scale = std::max(scale, std::fabs(b[i]));
  return worst / scale;
}

// How a test commits a captured window (the real commit_prefix, or a deliberately broken one).
using CommitFn = std::function<void(DraftHead&, ModelState&, int64_t keep)>;
inline void real_commit(DraftHead& h, ModelState& s, int64_t keep) { h.commit_prefix(s, keep); }

// For keep 1..n: verify_capture(window) on a clone of `base`, commit, and compare with `keep`
// one-row AR steps: the verify row keep-1 against AR's logits, the whole state, then the next
// decode's logits and the next greedy draft chain. Returns the failures ("" = none).
inline std::string commit_vs_ar(Model& m, const ModelState& base, const std::vector<int32_t>& window,
                                const CommitFn& commit = real_commit, int draft_depth = 3) {
  DraftHead& h = *m.draft_head();
  const int64_t n = int64_t(window.size()), V = m.info().vocab_size;
  std::string fails;
  for (int64_t keep = 1; keep <= n; ++keep) {
    const std::string at = "pos0 " + std::to_string(base.position()) + " keep " + std::to_string(keep) + ": ";
    auto got = base.clone();
    std::vector<float> rows;
    if (!h.verify_capture(*got, window, rows)) return at + "the head cannot capture";
    if (int64_t(rows.size()) != n * V) return at + "verify rows of the wrong size";
    commit(h, *got, keep);
    auto ar = base.clone();
    std::vector<float> last;
    for (int64_t i = 0; i < keep; ++i)
      m.forward(*ar, std::span<const int32_t>(&window[size_t(i)], 1), Logits::kLast, last);
    const std::vector<float> row(rows.begin() + (keep - 1) * V, rows.begin() + keep * V);
    if (max_rel_diff(row, last) > kRelTol) fails += at + "verify row differs from AR logits; ";
    if (got->position() != ar->position()) {
      fails += at + "position " + std::to_string(got->position()) + " vs " + std::to_string(ar->position()) + "; ";
      continue;
    }
    const std::string sm = state_mismatch(*got, *ar);
    if (!sm.empty()) fails += at + sm;
    // Both continue alike: the next logits and the next draft chain.
    const auto lg = m.decode(*got, window[0]), la = m.decode(*ar, window[0]);
    if (max_rel_diff(lg, la) > kRelTol) fails += at + "next logits differ; ";
    std::vector<int32_t> dg, da;
    h.draft(*got, 9 % int32_t(V), draft_depth, dg);
    h.draft(*ar, 9 % int32_t(V), draft_depth, da);
    if (dg != da) fails += at + "next drafts differ; ";
  }
  return fails;
}

// A deliberately broken commit (one row too many kept whenever keep < n) must be caught.
inline void expect_broken_commit_caught(Model& m, const ModelState& base, const std::vector<int32_t>& window) {
  const int64_t n = int64_t(window.size());
  const CommitFn off_by_one = [n](DraftHead& h, ModelState& s, int64_t keep) { h.commit_prefix(s, std::min(keep + 1, n)); };
  EXPECT_NE(commit_vs_ar(m, base, window, off_by_one), "");
}

// Moving the largest float of section `name` by 1e-3 of max(1, its magnitude) in an otherwise
// equal state must be caught by state_mismatch: the comparison itself can fail.
inline void expect_perturbation_caught(Model& m, const ModelState& s, const std::string& name) {
  std::vector<StateSection> sec;
  s.save(sec);
  bool found = false;
  for (auto& x : sec)
    if (x.name == name && x.bytes.size() >= 4) {
      std::vector<float> f(x.bytes.size() / 4);
      std::memcpy(f.data(), x.bytes.data(), f.size() * 4);
      float& v = *std::max_element(f.begin(), f.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
      v += 1e-3f * std::max(1.0f, std::fabs(v));
      std::memcpy(x.bytes.data(), f.data(), f.size() * 4);
      found = true;
    }
  ASSERT_TRUE(found) << name;
  auto bad = m.new_state();
  bad->load(sec);
  EXPECT_EQ(state_mismatch(s, s), "");
  EXPECT_NE(state_mismatch(*bad, s), "") << name;
}

}  // namespace ds4::draft_test
