// ds4's sampler (antirez/ds4 ds4.c): sample_top_p_min_p(), sample_full_vocab(),
// sample_argmax(), and the dense distribution one such draw follows (speculative exact).
// Float32 arithmetic on purpose: ds4 sums probabilities in float, and the cut points (min-p,
// top-p) and the draw depend on those exact sums.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
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

// What one ds4 draw chooses from: the kept candidates in the order the draw walks them, with
// their unnormalised float weights, the float total the uniform is scaled by, and the id
// returned when the walk runs off the end. `fixed` >= 0: no draw at all (argmax fallbacks).
struct Kept {
  std::vector<Cand> c;
  float total = 0.0f;
  int32_t end = 0;
  int32_t fixed = -1;
};

// Sorted candidates: stop below min-p (relative to the best), stop once the raw cumulative sum
// reaches top_p.
void keep_sorted(std::vector<Cand>& c, float sum, float min_p, float top_p, Kept& k) {
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
  c.resize(filtered);
  k.c = std::move(c);
  k.total = filtered_sum;
  k.end = k.c.back().id;
}

void keep_full_vocab(std::span<const float> logits, float t, float top_p, float min_p, Kept& k) {
  float max_logit = -INFINITY;
  int32_t best = 0;
  size_t finite = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) continue;
    finite++;
    if (logits[i] > max_logit) max_logit = logits[i], best = int32_t(i);
  }
  if (finite == 0) return void(k.fixed = argmax_f32(logits));
  std::vector<Cand> c;
  c.reserve(finite);
  float sum = 0.0f;
  if (top_p >= 1.0f) {
    // No sort needed: min-p here compares the *unnormalised* weight to min_p (ds4 quirk); the
    // walk goes in id order and ends on the best id.
    const float min_rel = min_p > 0.0f ? min_p : 0.0f;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!std::isfinite(logits[i])) continue;
      const float p = std::exp((logits[i] - max_logit) / t);
      if (p >= min_rel) sum += p, c.push_back({int32_t(i), logits[i], p});
    }
    if (sum <= 0.0f || !std::isfinite(sum)) return void(k.fixed = best);
    k.c = std::move(c);
    k.total = sum;
    k.end = best;
    return;
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) continue;
    const float p = std::exp((logits[i] - max_logit) / t);
    c.push_back({int32_t(i), logits[i], p});
    sum += p;
  }
  if (sum <= 0.0f || !std::isfinite(sum)) return void(k.fixed = best);
  // ds4 uses qsort; glibc's qsort is a stable merge sort for these sizes, so equal logits
  // stay in id order. stable_sort pins that order on every libc.
  std::stable_sort(c.begin(), c.end(), [](const Cand& a, const Cand& b) { return a.logit > b.logit; });
  keep_sorted(c, sum, min_p > 0.0f ? min_p : 0.0f, top_p, k);
}

// ds4.c sample_top_p_min_p's candidate set for one row (temperature > 0).
void ds4_keep(std::span<const float> logits, const SamplerParams& p, Kept& k) {
  float t = float(p.temperature), top_p = float(p.top_p), min_p = float(p.min_p);
  if (top_p <= 0.0f || top_p > 1.0f) top_p = 1.0f;
  if (min_p < 0.0f) min_p = 0.0f;
  if (p.top_k <= 0) return keep_full_vocab(logits, t, top_p, min_p, k);
  const size_t n = std::min<size_t>(std::min(p.top_k, 1024), logits.size());
  // Bounded insertion-sorted list: a value equal to an entry goes after it (strict '<'),
  // and once full, a value equal to the last entry is dropped -> lower ids win ties.
  std::vector<Cand> c;
  c.reserve(n);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    if (!std::isfinite(v)) continue;
    if (c.size() == n && v <= c.back().logit) continue;
    size_t j = c.size() < n ? c.size() : n - 1;
    if (c.size() < n) c.push_back({});
    while (j > 0 && c[j - 1].logit < v) {
      c[j] = c[j - 1];
      j--;
    }
    c[j] = {int32_t(i), v, 0.0f};
  }
  if (c.empty()) return void(k.fixed = argmax_f32(logits));
  const float max_logit = c[0].logit;
  float sum = 0.0f;
  for (auto& x : c) sum += x.prob = std::exp((x.logit - max_logit) / t);
  if (sum <= 0.0f || !std::isfinite(sum)) return void(k.fixed = c[0].id);
  keep_sorted(c, sum, min_p, top_p, k);
}

}  // namespace

int32_t ds4_sample(std::span<const float> logits, const SamplerParams& p, Ds4Rng& rng) {
  if (float(p.temperature) <= 0.0f) return argmax_f32(logits);
  Kept k;
  ds4_keep(logits, p, k);
  if (k.fixed >= 0) return k.fixed;
  float r = rng.next_f32() * k.total;
  for (const Cand& x : k.c) {
    r -= x.prob;
    if (r <= 0.0f) return x.id;
  }
  return k.end;
}

void ds4_distribution(std::span<const float> logits, const SamplerParams& p, std::span<double> probs_out) {
  DS4_CHECK(probs_out.size() == logits.size(), "ds4_distribution: size mismatch");
  std::fill(probs_out.begin(), probs_out.end(), 0.0);
  Kept k;
  if (float(p.temperature) <= 0.0f) k.fixed = argmax_f32(logits);
  else ds4_keep(logits, p, k);
  if (k.fixed >= 0) return void(probs_out[size_t(k.fixed)] = 1.0);
  for (const Cand& x : k.c) probs_out[size_t(x.id)] = double(x.prob) / double(k.total);
}

}  // namespace ds4::engine
