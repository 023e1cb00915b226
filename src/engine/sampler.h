#pragma once
// Token samplers of the two golden masters (SPEC.md §2). Both are stateful only through
// their RNG, which lives with the request so each request's draws are reproducible.
//   kMtplx (Qwen): float64 softmax(logits/T), top-p then top-k (ties by vocabulary id),
//                  renormalise, one NumPy Generator.choice draw (PCG64). No min-p.
//   kDs4 (DeepSeek/GLM): ds4.c sample_top_p_min_p: bounded sorted candidate list (top-k
//                  capped at 1024), float32 expf/sums, min-p relative to the best, top-p on
//                  raw cumulative sums, xorshift64* draws, argmax fallbacks.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/rng.h"
#include "models/sample_candidates.h"

namespace ds4::engine {

enum class SamplerKind { kMtplx, kDs4 };

struct SamplerParams {
  // double like the Python reference; the ds4 path rounds to float as ds4's C code does.
  double temperature = 1.0;  // <= 0: greedy (argmax, no draw)
  double top_p = 0.95;
  int top_k = 20;            // <= 0: no top-k
  double min_p = 0.0;
  uint64_t seed = 12345;
};

// Family defaults: MTPLX T=1, top-p 0.95, top-k 20, seed 12345; ds4 (ds4.h) T=1, top-p 1,
// min-p 0.05, top-k 0 (ds4-server's default). Same seed default for both.
SamplerParams default_sampler_params(SamplerKind kind);
SamplerKind sampler_kind_for_family(const std::string& model_family);
const char* sampler_kind_name(SamplerKind kind);

// The first value the chosen sampler cannot honour (e.g. non-zero min-p on the MTPLX path,
// NaN, negative top-k/temperature beyond the accepted forms): its field's name and the
// message; nullopt when all are fine. The server names the request's field from it.
struct SamplerProblem {
  std::string field, message;
};
std::optional<SamplerProblem> sampler_problem(SamplerKind kind, const SamplerParams& p);
// Throws ds4::InputError with sampler_problem's message.
void validate_sampler_params(SamplerKind kind, const SamplerParams& p);

class Sampler {
 public:
  Sampler(SamplerKind kind, const SamplerParams& params);
  // Seeds wider than 64 bits (NumPy accepts any Python int): little-endian u32 words.
  Sampler(SamplerKind kind, const SamplerParams& params, const std::vector<uint32_t>& seed);
  // logits: one row of vocab floats. Returns the token id.
  int32_t sample(std::span<const float> logits);
  // The same draw from the row's candidates (models/sample_candidates.h), bit for bit, or
  // nullopt -- before touching the RNG -- when they cannot decide it; then sample() the row.
  std::optional<int32_t> sample_from(const SampleCandidates& c);
  // What sample_from() wants for these settings; k 0 = it needs the full row anyway (do not
  // ask for candidates). `full_vocab_k`: the guess for settings that look at the whole
  // vocabulary through a cut that is usually narrow (ds4's min-p without top-k/top-p).
  CandidateRequest candidates_request(int full_vocab_k = 256) const;
  int candidates_k(int full_vocab_k = 256) const { return candidates_request(full_vocab_k).k; }
  SamplerKind kind() const { return kind_; }
  const SamplerParams& params() const { return params_; }
  uint64_t ds4_rng_state() const { return ds4_rng_.state(); }
  // The MTPLX path's generator: exact speculative decoding (engine/speculative.h) draws
  // its draft, acceptance, residual and bonus samples from the same stream, in MTPLX order.
  Pcg64& pcg() { return pcg_; }
  // The ds4 path's generator (speculative walks continue its stream the same way).
  Ds4Rng& ds4_rng() { return ds4_rng_; }

 private:
  int32_t sample_mtplx(std::span<const float> logits);
  SamplerKind kind_;
  SamplerParams params_;
  Pcg64 pcg_;
  Ds4Rng ds4_rng_;
};

// ds4's sampler as a free function (exposed for tests and the speculative loop).
int32_t ds4_sample(std::span<const float> logits, const SamplerParams& p, Ds4Rng& rng);
// ds4_sample() from a row's candidates: exact for greedy, any top-k (<= 1024, ds4's cap), and
// top-k off with top-p 1 and min-p > 0 when every token above min-p is a candidate; also
// whenever the candidates hold every finite logit. Else nullopt, with no draw made.
std::optional<int32_t> ds4_sample_candidates(const SampleCandidates& c, const SamplerParams& p, Ds4Rng& rng);
int ds4_candidates_k(const SamplerParams& p, int full_vocab_k);
// MTPLX's draw from candidates: greedy on an all-finite row; sampling with top-k (< 1024) and
// the candidates' exp_sum, where every cut and the draw clear a 1e-8 margin that covers the
// difference between a GPU and the host normaliser (else nullopt; the caller restores the
// generator). The same token as the row, not the same intermediate bits.
std::optional<int32_t> mtplx_sample_candidates(const SampleCandidates& c, const SamplerParams& p, Pcg64& rng);
// The distribution one ds4_sample() draw follows (dense, float64): the kept candidates'
// float weights over their float total; a one-hot row where ds4 falls back to argmax.
void ds4_distribution(std::span<const float> logits, const SamplerParams& p, std::span<double> probs_out);
// MTPLX's filtered distribution (dense, float64): softmax, top-p, top-k, renormalised.
void mtplx_distribution(std::span<const float> logits, const SamplerParams& p,
                        std::span<double> probs_out);
// MTPLX sample_from_distribution() on a dense float64 vector: probs / sum, then
// Generator.choice (cumsum, / cdf[-1], searchsorted right of one random() draw).
int32_t mtplx_draw(std::span<const double> probs, Pcg64& rng);

}  // namespace ds4::engine
