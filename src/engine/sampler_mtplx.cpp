// MTPLX sampler (youssofal/MTPLX mtplx/sampling.py): softmax() in float64,
// apply_top_p_top_k() with deterministic_top_k_order() tie breaking, and
// sample_from_distribution() -> numpy Generator.choice(p=...), which builds
// cdf = cumsum(p), divides by cdf[-1] and returns searchsorted(cdf, random(), "right").
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "engine/sampler.h"

namespace ds4::engine {
namespace {

int32_t argmax_f64(std::span<const double> v) {
  // np.argmax: first maximum.
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return int32_t(best);
}

// Ids ordered by (-value, id), first `count` of them.
std::vector<int32_t> ranked(std::span<const double> v, size_t count) {
  std::vector<int32_t> ids(v.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto cmp = [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); };
  count = std::min(count, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(), cmp);
  ids.resize(count);
  return ids;
}

}  // namespace

void mtplx_distribution(std::span<const float> logits, const SamplerParams& p,
                        std::span<double> probs) {
  const size_t n = logits.size();
  DS4_CHECK(probs.size() == n, "mtplx_distribution: size mismatch");
  // softmax(): scaled = logits / T; scaled -= max; exp / sum.
  double mx = -INFINITY;
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, double(logits[i]) / p.temperature);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += probs[i] = std::exp(double(logits[i]) / p.temperature - mx);
  if (!std::isfinite(total) || total <= 0) throw Error("sampler: logits cannot be normalised");
  for (auto& x : probs) x /= total;

  const size_t k = (p.top_k > 0 && size_t(p.top_k) < n) ? size_t(p.top_k) : 0;
  std::vector<char> keep(n, 1);
  std::vector<int32_t> top;
  if (k) top = ranked(probs, k);
  if (p.top_p > 0 && p.top_p < 1.0) {
    // Keep while the mass *before* a token is below top_p (the first one is always kept).
    std::vector<int32_t> order = k ? top : ranked(probs, n);
    std::vector<char> nucleus(n, 0);
    double before = 0;
    for (int32_t id : order) {
      if (before < p.top_p) nucleus[id] = 1;
      before += probs[id];
    }
    for (size_t i = 0; i < n; ++i) keep[i] &= nucleus[i];
  }
  if (k) {
    std::vector<char> in_top(n, 0);
    for (int32_t id : top) in_top[id] = 1;
    for (size_t i = 0; i < n; ++i) keep[i] &= in_top[i];
  }
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += keep[i] ? probs[i] : 0.0;
  if (kept <= 0) {
    int32_t best = argmax_f64(probs);
    std::fill(probs.begin(), probs.end(), 0.0);
    probs[best] = 1.0;
    return;
  }
  for (size_t i = 0; i < n; ++i) probs[i] = keep[i] ? probs[i] / kept : 0.0;
}

int32_t mtplx_draw(std::span<const double> probs, Pcg64& rng) {
  double total = 0;
  for (double x : probs) total += x;
  std::vector<double> cdf(probs.size());
  double acc = 0;
  for (size_t i = 0; i < probs.size(); ++i) cdf[i] = acc += probs[i] / total;
  const double last = cdf.back();
  for (auto& c : cdf) c /= last;
  const double u = rng.next_double();
  // searchsorted(side="right"): first index with cdf[i] > u.
  auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
  return int32_t(std::min<size_t>(size_t(it - cdf.begin()), cdf.size() - 1));
}

int32_t Sampler::sample_mtplx(std::span<const float> logits) {
  if (params_.temperature <= 0) {
    // MTPLX greedy: argmax of the float64 logits, no RNG draw.
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (double(logits[i]) > double(logits[best])) best = i;
    return int32_t(best);
  }
  std::vector<double> probs(logits.size());
  mtplx_distribution(logits, params_, probs);
  return mtplx_draw(probs, pcg_);
}

}  // namespace ds4::engine
