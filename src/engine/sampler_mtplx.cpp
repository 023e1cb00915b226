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

namespace {

// The MTPLX draw from candidates takes the row's softmax normaliser from SampleCandidates::
// exp_sum, which on the GPU is not the host's id-order sum bit for bit (relative difference
// < 2e-11: 151k-term float64 sums, 1-ulp exps). Every decision below compares a mass or a cdf
// value in [0, 1] that this moves by ~1e-10 at most; one closer than kMargin to its
// threshold is left to the full row, so the token is the one the row gives.
constexpr double kMargin = 1e-8;

// Candidate order (logit desc, id asc) is MTPLX's rank order (probability desc, id asc) when
// distinct logits keep clearly distinct weights: checked over [0, last].
bool ranks_hold(const SampleCandidates& c, const std::vector<double>& e, size_t last) {
  for (size_t i = 1; i <= last; ++i)
    if (c.logits[i] != c.logits[i - 1] && !(e[i - 1] > e[i] * (1 + 1e-9))) return false;
  return true;
}

}  // namespace

std::optional<int32_t> mtplx_sample_candidates(const SampleCandidates& c, const SamplerParams& p, Pcg64& rng) {
  // Greedy is np.argmax of the row, the ds4 argmax unless a NaN (which np.argmax can return)
  // is there: only an all-finite row is decided here.
  if (p.temperature <= 0) return c.finite == c.vocab ? std::optional<int32_t>(c.argmax) : std::nullopt;
  const size_t n = size_t(c.vocab);
  const size_t k = (p.top_k > 0 && size_t(p.top_k) < n) ? size_t(p.top_k) : 0;
  // Without top-k the kept set (all, or a nucleus of any width) is not bounded by the candidates.
  if (k == 0 || c.finite != c.vocab || c.ids.size() < k || !(c.exp_sum > 0) || !std::isfinite(c.exp_sum))
    return std::nullopt;
  // The top-k cut: past the tie group of the k-th logit, one candidate with a smaller logit
  // must show the gap (every token after it weighs no more), unless none is left at all.
  size_t q = k;
  while (q < c.ids.size() && c.logits[q] == c.logits[k - 1]) ++q;
  if (q == c.ids.size() && !c.complete()) return std::nullopt;
  const size_t last = std::min(q, c.ids.size() - 1);
  // softmax() term for term: the max of l / T is the top candidate's (the row is finite).
  const double mx = double(c.logits[0]) / p.temperature;
  std::vector<double> e(last + 1), pr(last + 1);
  for (size_t i = 0; i <= last; ++i) {
    e[i] = std::exp(double(c.logits[i]) / p.temperature - mx);
    pr[i] = e[i] / c.exp_sum;
  }
  if (!ranks_hold(c, e, last)) return std::nullopt;
  // apply_top_p_top_k: the nucleus over the top-k in rank order (mass before < top_p).
  size_t kept_n = k;
  if (p.top_p > 0 && p.top_p < 1.0) {
    double before = 0;
    kept_n = 0;
    for (size_t i = 0; i < k; ++i) {
      if (std::fabs(before - p.top_p) <= kMargin) return std::nullopt;
      if (before < p.top_p) kept_n = i + 1;
      before += pr[i];
    }
  }
  // Renormalise and draw as mtplx_draw does over the dense row, whose zeros add nothing: the
  // kept tokens in id order.
  std::vector<std::pair<int32_t, double>> kept;
  for (size_t i = 0; i < kept_n; ++i) kept.push_back({c.ids[i], pr[i]});
  std::sort(kept.begin(), kept.end());
  double kept_sum = 0;
  for (auto& x : kept) kept_sum += x.second;
  if (!(kept_sum > 0)) return std::nullopt;
  double total = 0;
  for (auto& x : kept) total += x.second /= kept_sum;
  std::vector<double> cdf(kept.size());
  double acc = 0;
  for (size_t i = 0; i < kept.size(); ++i) cdf[i] = acc += kept[i].second / total;
  for (auto& x : cdf) x /= acc;
  const double u = rng.next_double();
  const size_t j = size_t(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
  if (j >= cdf.size() || cdf[j] - u <= kMargin || (j > 0 && u - cdf[j - 1] <= kMargin)) return std::nullopt;
  return kept[j].first;
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
