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

// `fin`: every finite logit of the row in id order (or, from candidates, every one that can
// matter: see ds4_keep_candidates). `prob` is filled here.
void keep_full_vocab(std::vector<Cand> fin, float t, float top_p, float min_p, Kept& k) {
  float max_logit = -INFINITY;
  int32_t best = 0;
  for (const Cand& x : fin)
    if (x.logit > max_logit) max_logit = x.logit, best = x.id;
  std::vector<Cand> c;
  c.reserve(fin.size());
  float sum = 0.0f;
  if (top_p >= 1.0f) {
    // No sort needed: min-p here compares the *unnormalised* weight to min_p (ds4 quirk); the
    // walk goes in id order and ends on the best id.
    const float min_rel = min_p > 0.0f ? min_p : 0.0f;
    for (const Cand& x : fin) {
      const float p = std::exp((x.logit - max_logit) / t);
      if (p >= min_rel) sum += p, c.push_back({x.id, x.logit, p});
    }
    if (sum <= 0.0f || !std::isfinite(sum)) return void(k.fixed = best);
    k.c = std::move(c);
    k.total = sum;
    k.end = best;
    return;
  }
  for (const Cand& x : fin) {
    const float p = std::exp((x.logit - max_logit) / t);
    c.push_back({x.id, x.logit, p});
    sum += p;
  }
  if (sum <= 0.0f || !std::isfinite(sum)) return void(k.fixed = best);
  // ds4 uses qsort; glibc's qsort is a stable merge sort for these sizes, so equal logits
  // stay in id order. stable_sort pins that order on every libc.
  std::stable_sort(c.begin(), c.end(), [](const Cand& a, const Cand& b) { return a.logit > b.logit; });
  keep_sorted(c, sum, min_p > 0.0f ? min_p : 0.0f, top_p, k);
}

// The bounded top-k list (value descending, ties lower id first) -> weights and the cut.
void keep_top_list(std::vector<Cand> c, float t, float top_p, float min_p, Kept& k) {
  const float max_logit = c[0].logit;
  float sum = 0.0f;
  for (auto& x : c) sum += x.prob = std::exp((x.logit - max_logit) / t);
  if (sum <= 0.0f || !std::isfinite(sum)) return void(k.fixed = c[0].id);
  keep_sorted(c, sum, min_p, top_p, k);
}

struct Ds4Cut {
  float t, top_p, min_p;
};
// ds4.c's clamps of the request's settings (float, as ds4 holds them).
Ds4Cut ds4_cut(const SamplerParams& p) {
  Ds4Cut c{float(p.temperature), float(p.top_p), float(p.min_p)};
  if (c.top_p <= 0.0f || c.top_p > 1.0f) c.top_p = 1.0f;
  if (c.min_p < 0.0f) c.min_p = 0.0f;
  return c;
}

size_t ds4_list_size(const SamplerParams& p, size_t vocab) {
  return std::min<size_t>(std::min(p.top_k, 1024), vocab);
}

// ds4.c sample_top_p_min_p's candidate set for one row (temperature > 0).
void ds4_keep(std::span<const float> logits, const SamplerParams& p, Kept& k) {
  const Ds4Cut cut = ds4_cut(p);
  if (p.top_k <= 0) {
    std::vector<Cand> fin;
    for (size_t i = 0; i < logits.size(); ++i)
      if (std::isfinite(logits[i])) fin.push_back({int32_t(i), logits[i], 0.0f});
    if (fin.empty()) return void(k.fixed = argmax_f32(logits));
    return keep_full_vocab(std::move(fin), cut.t, cut.top_p, cut.min_p, k);
  }
  const size_t n = ds4_list_size(p, logits.size());
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
  keep_top_list(std::move(c), cut.t, cut.top_p, cut.min_p, k);
}

// The same set from a row's candidates; false when they cannot decide it (then the caller
// samples the full row). Same inputs in the same order as ds4_keep, so the same floats.
bool ds4_keep_candidates(const SampleCandidates& sc, const SamplerParams& p, Kept& k) {
  const Ds4Cut cut = ds4_cut(p);
  if (sc.finite == 0) return k.fixed = sc.argmax, true;
  std::vector<Cand> c;
  if (p.top_k > 0) {
    // The list holds the top min(top_k, 1024, vocab) finite values: the first candidates.
    const size_t n = ds4_list_size(p, size_t(sc.vocab));
    if (sc.ids.size() < n && !sc.complete()) return false;
    for (size_t i = 0; i < std::min(n, sc.ids.size()); ++i) c.push_back({sc.ids[i], sc.logits[i], 0.0f});
    keep_top_list(std::move(c), cut.t, cut.top_p, cut.min_p, k);
    return true;
  }
  // Full vocabulary: only exact when every token that enters a sum is a candidate. With
  // top-p off and min-p on, a token enters iff exp((l - max) / t) >= min_p; that weight
  // does not grow as the logit falls, so if the smallest candidate is already below min_p,
  // so is every other token. Top-p (or min-p 0) sums the whole vocabulary in id order.
  if (!sc.complete()) {
    if (cut.top_p < 1.0f || cut.min_p <= 0.0f || sc.ids.empty()) return false;
    if (!(std::exp((sc.logits.back() - sc.logits.front()) / cut.t) < cut.min_p)) return false;
  }
  for (size_t i = 0; i < sc.ids.size(); ++i) c.push_back({sc.ids[i], sc.logits[i], 0.0f});
  std::sort(c.begin(), c.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
  keep_full_vocab(std::move(c), cut.t, cut.top_p, cut.min_p, k);
  return true;
}

int32_t ds4_draw(const Kept& k, Ds4Rng& rng) {
  if (k.fixed >= 0) return k.fixed;
  float r = rng.next_f32() * k.total;
  for (const Cand& x : k.c) {
    r -= x.prob;
    if (r <= 0.0f) return x.id;
  }
  return k.end;
}

}  // namespace

int32_t ds4_sample(std::span<const float> logits, const SamplerParams& p, Ds4Rng& rng) {
  if (float(p.temperature) <= 0.0f) return argmax_f32(logits);
  Kept k;
  ds4_keep(logits, p, k);
  return ds4_draw(k, rng);
}

std::optional<int32_t> ds4_sample_candidates(const SampleCandidates& c, const SamplerParams& p, Ds4Rng& rng) {
  if (float(p.temperature) <= 0.0f) return c.argmax;  // argmax_f32 over the row
  Kept k;
  if (!ds4_keep_candidates(c, p, k)) return std::nullopt;  // decided before any draw
  return ds4_draw(k, rng);
}

int ds4_candidates_k(const SamplerParams& p, int full_vocab_k) {
  if (float(p.temperature) <= 0.0f) return 1;
  if (p.top_k > 0) return std::min(p.top_k, 1024);
  const Ds4Cut cut = ds4_cut(p);
  return cut.top_p >= 1.0f && cut.min_p > 0.0f ? full_vocab_k : 0;
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
