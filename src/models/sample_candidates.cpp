#include "models/sample_candidates.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace ds4 {

void top_candidates(std::span<const float> row, int k, SampleCandidates& out) {
  DS4_CHECK(k >= 1, "top_candidates: k must be >= 1");
  out.vocab = int64_t(row.size());
  out.argmax = 0;
  out.finite = 0;
  float best = -INFINITY;
  if (k == 1) {
    // Greedy's request (every ds4 / MTPLX sampler at temperature 0): the first largest finite
    // value without an id list and a sort over the row, which a 16-sequence decode batch paid 16
    // times per step on the host, ~0.25 ms per 129K-vocab row (issue #24).
    float top = -INFINITY;
    int32_t top_id = -1, argmax = 0;
    int64_t finite = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      const float v = row[i];
      if (v > best) best = v, argmax = int32_t(i);  // strict '>' from -inf: ds4 sample_argmax
      if (!std::isfinite(v)) continue;
      ++finite;
      if (top_id < 0 || v > top) top = v, top_id = int32_t(i);  // '>' keeps the lower id on ties (-0 == +0 too)
    }
    out.argmax = argmax;
    out.finite = finite;
    out.ids.assign(top_id < 0 ? 0 : 1, top_id);
    out.logits.assign(top_id < 0 ? 0 : 1, top);
    out.exp_sum = NAN;
    return;
  }
  std::vector<int32_t> ids;
  ids.reserve(row.size());
  for (size_t i = 0; i < row.size(); ++i) {
    const float v = row[i];
    if (v > best) best = v, out.argmax = int32_t(i);  // strict '>' from -inf: ds4 sample_argmax
    if (std::isfinite(v)) ids.push_back(int32_t(i));
  }
  out.finite = int64_t(ids.size());
  const size_t n = std::min(ids.size(), size_t(k));
  // Float '>' treats -0 and +0 as equal, so they tie and order by id, as on the CPU samplers.
  std::partial_sort(ids.begin(), ids.begin() + long(n), ids.end(), [&](int32_t a, int32_t b) {
    return row[size_t(a)] > row[size_t(b)] || (row[size_t(a)] == row[size_t(b)] && a < b);
  });
  ids.resize(n);
  out.logits.resize(n);
  for (size_t i = 0; i < n; ++i) out.logits[i] = row[size_t(ids[i])];
  out.ids = std::move(ids);
  out.exp_sum = NAN;
}

void top_candidates(std::span<const float> row, const CandidateRequest& req, SampleCandidates& out) {
  top_candidates(row, req.k, out);
  const double t = req.exp_sum_temperature;
  if (!(t > 0) || out.finite != out.vocab || out.ids.empty()) return;
  // mtplx_distribution's softmax, term for term: max of l / T, then the id-order sum.
  const double mx = double(out.logits[0]) / t;
  double total = 0;
  for (float v : row) total += std::exp(double(v) / t - mx);
  out.exp_sum = total;
}

}  // namespace ds4
