// SpecDraws (speculative.h): the stochastic walks' view of the turn's sampler, one place for
// both golden masters' samplers so the walks themselves never know the family.
#include <algorithm>

#include "core/error.h"
#include "engine/speculative.h"

namespace ds4::engine {

int32_t SpecDraws::sample(std::span<const float> row, const SamplerParams& p) {
  DS4_CHECK(valid(), "speculative: no sampler stream");
  if (kind_ == SamplerKind::kDs4) return ds4_sample(row, p, *ds4_);
  std::vector<double> probs(row.size());  // MTPLX AR: the filtered distribution, one draw
  mtplx_distribution(row, p, probs);
  return mtplx_draw(probs, *pcg_);
}

void SpecDraws::distribution(std::span<const float> row, const SamplerParams& p, std::span<double> out) const {
  if (kind_ == SamplerKind::kDs4) ds4_distribution(row, p, out);
  else mtplx_distribution(row, p, out);
}

int32_t SpecDraws::draw(std::span<const double> probs) {
  DS4_CHECK(valid() && !probs.empty(), "speculative: draw without a stream or a distribution");
  if (kind_ == SamplerKind::kMtplx) return mtplx_draw(probs, *pcg_);
  // ds4 has no dense-distribution draw of its own: inverse CDF over float64 sums with one
  // 53-bit uniform from its stream (the residual and bonus draws only need the right law).
  double total = 0;
  for (double x : probs) total += x;
  const double u = uniform() * total;
  double acc = 0;
  size_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!(probs[i] > 0)) continue;
    last = i;
    if (u < (acc += probs[i])) return int32_t(i);
  }
  return int32_t(last);  // rounding at the top end: the last id with mass
}

double SpecDraws::uniform() {
  DS4_CHECK(valid(), "speculative: no sampler stream");
  if (kind_ == SamplerKind::kMtplx) return pcg_->next_double();  // MTPLX: rng.random()
  return double(ds4_->next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace ds4::engine
