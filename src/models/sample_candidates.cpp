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
