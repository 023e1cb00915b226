// ds4's sampler (antirez/ds4 ds4.c): sample_top_p_min_p(), sample_full_vocab(),
// sample_argmax(). Float32 arithmetic on purpose: ds4 sums probabilities in float, and the
// cut points (min-p, top-p) and the draw depend on those exact sums.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/sampler.h"

namespace ds4::engine {
namespace {

int32_t argmax_f32(std::span<const float> v) {
  // sample_argmax: strict '>' from -inf, so NaN/-inf rows return 0 and ties keep the lowest id.
  int32_t best = 0;
  float best_v = -INFINITY;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] > best_v) best_v = v[i], best = int32_t(i);
  return best;
}

struct Cand {
  int32_t id;
  float logit;
  float prob;
};

// Walks the sorted candidates: stop below min-p (relative to the best), stop once the raw
// cumulative sum reaches top_p; then one draw over the kept prefix.
int32_t draw_sorted(const std::vector<Cand>& c, float sum, float min_p, float top_p, Ds4Rng& rng) {
  const float min_prob = (c[0].prob / sum) * min_p;
  float filtered_sum = 0.0f;
  size_t filtered = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const float p = c[i].prob / sum;
    if (i > 0 && p < min_prob) break;
    filtered_sum += c[i].prob;
    filtered++;
    if (filtered_sum / sum >= top_p) break;
  }
  if (filtered == 0) return c[0].id;
  float r = rng.next_f32() * filtered_sum;
  for (size_t i = 0; i < filtered; ++i) {
    r -= c[i].prob;
    if (r <= 0.0f) return c[i].id;
  }
  return c[filtered - 1].id;
}

int32_t full_vocab(std::span<const float> logits, float t, float top_p, float min_p, Ds4Rng& rng) {
  float max_logit = -INFINITY;
  int32_t best = 0;
  size_t finite = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) continue;
    finite++;
    if (logits[i] > max_logit) max_logit = logits[i], best = int32_t(i);
  }
  if (finite == 0) return argmax_f32(logits);
  if (top_p >= 1.0f) {
    // No sort needed: min-p here compares the *unnormalised* weight to min_p (ds4 quirk).
    const float min_rel = min_p > 0.0f ? min_p : 0.0f;
    float sum = 0.0f;
    for (float v : logits) {
      if (!std::isfinite(v)) continue;
      const float p = std::exp((v - max_logit) / t);
      if (p >= min_rel) sum += p;
    }
    if (sum <= 0.0f || !std::isfinite(sum)) return best;
    float r = rng.next_f32() * sum;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!std::isfinite(logits[i])) continue;
      const float p = std::exp((logits[i] - max_logit) / t);
      if (p < min_rel) continue;
      r -= p;
      if (r <= 0.0f) return int32_t(i);
    }
    return best;
  }
  std::vector<Cand> c;
  c.reserve(finite);
  float sum = 0.0f;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) continue;
    const float p = std::exp((logits[i] - max_logit) / t);
    c.push_back({int32_t(i), logits[i], p});
    sum += p;
  }
  if (sum <= 0.0f || !std::isfinite(sum)) return best;
  // ds4 uses qsort; glibc's qsort is a stable merge sort for these sizes, so equal logits
  // stay in id order. stable_sort pins that order on every libc.
  std::stable_sort(c.begin(), c.end(), [](const Cand& a, const Cand& b) { return a.logit > b.logit; });
  return draw_sorted(c, sum, min_p > 0.0f ? min_p : 0.0f, top_p, rng);
}

}  // namespace

int32_t ds4_sample(std::span<const float> logits, const SamplerParams& p, Ds4Rng& rng) {
  float t = float(p.temperature), top_p = float(p.top_p), min_p = float(p.min_p);
  if (t <= 0.0f) return argmax_f32(logits);
  if (top_p <= 0.0f || top_p > 1.0f) top_p = 1.0f;
  if (min_p < 0.0f) min_p = 0.0f;
  if (p.top_k <= 0) return full_vocab(logits, t, top_p, min_p, rng);
  const size_t k = std::min<size_t>(std::min(p.top_k, 1024), logits.size());
  // Bounded insertion-sorted list: a value equal to an entry goes after it (strict '<'),
  // and once full, a value equal to the last entry is dropped -> lower ids win ties.
  std::vector<Cand> c;
  c.reserve(k);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (!std::isfinite(v)) continue;
    if (c.size() == k && v <= c.back().logit) continue;
    size_t j = c.size() < k ? c.size() : k - 1;
    if (c.size() < k) c.push_back({});
    while (j > 0 && c[j - 1].logit < v) {
      c[j] = c[j - 1];
      j--;
    }
    c[j] = {int32_t(i), v, 0.0f};
  }
  if (c.empty()) return argmax_f32(logits);
  const float max_logit = c[0].logit;
  float sum = 0.0f;
  for (auto& x : c) sum += x.prob = std::exp((x.logit - max_logit) / t);
  if (sum <= 0.0f || !std::isfinite(sum)) return c[0].id;
  return draw_sorted(c, sum, min_p, top_p, rng);
}

}  // namespace ds4::engine
