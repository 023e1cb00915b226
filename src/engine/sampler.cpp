#include "engine/sampler.h"

#include <cmath>

#include "core/error.h"

namespace ds4::engine {

SamplerParams default_sampler_params(SamplerKind kind) {
  SamplerParams p;
  if (kind == SamplerKind::kDs4) {
    p.temperature = 1.0;  // ds4.h DS4_DEFAULT_TEMPERATURE
    p.top_p = 1.0;        // DS4_DEFAULT_TOP_P
    p.top_k = 0;          // ds4_server.c request default
    p.min_p = 0.05;       // DS4_DEFAULT_MIN_P
  }
  return p;
}

SamplerKind sampler_kind_for_family(const std::string& family) {
  if (family.rfind("qwen", 0) == 0) return SamplerKind::kMtplx;
  return SamplerKind::kDs4;  // deepseek_v4, glm5
}

const char* sampler_kind_name(SamplerKind kind) {
  return kind == SamplerKind::kMtplx ? "mtplx" : "ds4";
}

std::optional<SamplerProblem> sampler_problem(SamplerKind kind, const SamplerParams& p) {
  auto bad = [](const std::string& field, double v, const std::string& why) {
    return SamplerProblem{field, "invalid " + field + " = " + std::to_string(v) + ": " + why};
  };
  if (!std::isfinite(p.temperature) || p.temperature < 0) return bad("temperature", p.temperature, "must be >= 0");
  // Below 1e-6 the scaled logits overflow a double (a subnormal temperature made every row
  // non-normalisable: a 500 mid-turn); 100 is the settings' own upper bound.
  if (p.temperature > 0 && p.temperature < 1e-6)
    return bad("temperature", p.temperature, "must be 0 (greedy) or at least 1e-6");
  if (p.temperature > 100) return bad("temperature", p.temperature, "must be at most 100");
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1) return bad("top_p", p.top_p, "must be in (0, 1]");
  if (p.top_k < 0) return bad("top_k", p.top_k, "must be >= 0 (0 = off)");
  if (!std::isfinite(p.min_p) || p.min_p < 0 || p.min_p > 1) return bad("min_p", p.min_p, "must be in [0, 1]");
  if (kind == SamplerKind::kMtplx && p.min_p != 0)
    return bad("min_p", p.min_p, "the Qwen (MTPLX) sampler has no min-p; use 0");
  return std::nullopt;
}

void validate_sampler_params(SamplerKind kind, const SamplerParams& p) {
  if (const auto problem = sampler_problem(kind, p)) throw InputError(problem->message);
}

Sampler::Sampler(SamplerKind kind, const SamplerParams& params)
    : kind_(kind), params_(params), pcg_(params.seed), ds4_rng_(params.seed) {}

Sampler::Sampler(SamplerKind kind, const SamplerParams& params, const std::vector<uint32_t>& seed)
    : kind_(kind), params_(params), pcg_(SeedSequence(seed)), ds4_rng_(params.seed) {}

int32_t Sampler::sample(std::span<const float> logits) {
  DS4_CHECK(!logits.empty(), "sampler: empty logits");
  if (kind_ == SamplerKind::kDs4) return ds4_sample(logits, params_, ds4_rng_);
  return sample_mtplx(logits);
}

std::optional<int32_t> Sampler::sample_from(const SampleCandidates& c) {
  if (kind_ == SamplerKind::kDs4) return ds4_sample_candidates(c, params_, ds4_rng_);
  const Pcg64 before = pcg_;  // a draw the candidates could not certify is taken back
  std::optional<int32_t> t = mtplx_sample_candidates(c, params_, pcg_);
  if (!t) pcg_ = before;
  return t;
}

CandidateRequest Sampler::candidates_request(int full_vocab_k) const {
  if (kind_ == SamplerKind::kDs4) return {ds4_candidates_k(params_, full_vocab_k), 0.0};
  if (params_.temperature <= 0) return {1, 0.0};
  // Sampling needs top-k (the kept set within the candidates) and the softmax normaliser;
  // a few candidates past the cut show its gap (more on CUDA, which always returns 1024).
  if (params_.top_k <= 0 || params_.top_k >= 1024) return {0, 0.0};
  return {std::min(params_.top_k + 32, 1024), params_.temperature};
}

}  // namespace ds4::engine
