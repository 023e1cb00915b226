// Stochastic speculative acceptance (categories exact and opportunistic), the per-turn
// category and DSpark-gate rules, and sampled generation. Golden master for the exact walk:
// MTPLX mtplx/generation.py generate_mtpk + mtplx/sampling.py (acceptance_probability,
// residual_distribution, sample_from_distribution); see speculative.h for the draw order.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/speculative.h"

namespace ds4::engine {

const char* spec_category_name(SpecCategory c) {
  switch (c) {
    case SpecCategory::kTargetOnly: return "target_only";
    case SpecCategory::kGreedy: return "greedy";
    case SpecCategory::kOpportunistic: return "opportunistic";
    case SpecCategory::kExact: return "exact";
  }
  return "?";
}

SpecCategory parse_spec_category(const std::string& name) {
  for (SpecCategory c : {SpecCategory::kTargetOnly, SpecCategory::kGreedy, SpecCategory::kOpportunistic,
                         SpecCategory::kExact})
    if (name == spec_category_name(c)) return c;
  throw InputError("speculative category '" + name + "': expected exact, opportunistic, greedy or target_only");
}

SpecCategory resolve_spec_category(bool speculation_on, const SamplerParams& p, SpecCategory stochastic) {
  if (!speculation_on) return SpecCategory::kTargetOnly;
  if (p.temperature <= 0) return SpecCategory::kGreedy;  // argmax turns: no draw to preserve
  if (stochastic == SpecCategory::kGreedy)
    throw InputError("speculative category 'greedy' cannot serve a sampled turn (temperature " +
                     std::to_string(p.temperature) + "); use exact, opportunistic or target_only");
  return stochastic;
}

double resolve_dspark_confidence(std::optional<double> user, SpecCategory category) {
  if (user) {
    if (!std::isfinite(*user) || *user < 0 || *user > 1)
      throw InputError("dspark_confidence = " + std::to_string(*user) + ": must be in [0, 1]");
    return *user;  // explicit values are kept as given, 0 included
  }
  // A confident-but-wrong draft costs an exact turn a residual draw (not just a wasted row),
  // so the unset gate is stricter there; every other category keeps the default.
  return category == SpecCategory::kExact ? std::max(kDsparkConfidenceDefault, kDsparkConfidenceExact)
                                          : kDsparkConfidenceDefault;
}

int32_t SpecDecoder::pick_exact(std::span<const float> row) {
  const size_t V = row.size();
  if (size_t(pick_k_ + 1) * V > q_.size()) throw Error("speculative: draft head asked for more picks than depth");
  std::span<double> q(q_.data() + size_t(pick_k_) * V, V);
  ++pick_k_;
  SamplerParams dp = cfg_.sampler;  // MTPLX: the draft sampler is the turn's unless set
  if (cfg_.draft_temperature) dp.temperature = *cfg_.draft_temperature;
  if (dp.temperature <= 0) {
    const int32_t t = argmax(row.data(), int64_t(V));
    std::fill(q.begin(), q.end(), 0.0);
    q[size_t(t)] = 1.0;
    return t;
  }
  draws_.distribution(row, dp, q);
  return draws_.draw(q);
}

bool SpecDecoder::walk_exact(int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out) {
  const int64_t V = model_.info().vocab_size;
  const int D = int(drafts_.size());
  p_.resize(size_t(V));
  auto target = [&](int k) {  // p_k, materialized only when the walk reaches row k
    draws_.distribution(std::span<const float>(rows_.data() + int64_t(k) * V, size_t(V)), cfg_.sampler, p_);
    stats_.target_rows++;
  };
  for (int k = 0; k < D; ++k) {
    const int32_t d = drafts_[size_t(k)];
    target(k);
    const double* q = q_.data() + int64_t(k) * V;
    const double pd = p_[size_t(d)], qd = q[d];
    const double a = qd <= 0 ? (pd > 0 ? 1.0 : 0.0) : std::min(1.0, pd / qd);
    if (draws_.uniform() <= a) {  // MTPLX: float(rng.random()) <= accept_prob
      out.accepted.push_back(d);
      stats_.accepted++;
      if (is_stop(d)) return true;  // an accepted stop ends the walk: no further draw
      continue;
    }
    // Correction from the residual max(p - q, 0), renormalised; p itself when it is empty.
    std::vector<double> r(static_cast<size_t>(V));
    double total = 0;
    for (int64_t v = 0; v < V; ++v) {
      const double x = p_[size_t(v)] - q[v];
      total += r[size_t(v)] = std::isfinite(x) && x > 0 ? x : 0.0;
    }
    if (!(total > 0) || !std::isfinite(total)) {
      total = 0;
      for (int64_t v = 0; v < V; ++v) total += r[size_t(v)] = p_[size_t(v)] > 0 ? p_[size_t(v)] : 0.0;
    }
    for (auto& x : r) x /= total;
    out.bonus = draws_.draw(r);
    stats_.corrections++;
    return false;
  }
  if (int64_t(D) >= budget) return true;  // every token the turn may emit is placed: no bonus draw
  target(D);
  out.bonus = draws_.draw(p_);
  stats_.bonus++;
  return false;
}

bool SpecDecoder::walk_opportunistic(int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out) {
  const int64_t V = model_.info().vocab_size;
  const int D = int(drafts_.size());
  auto sample_row = [&](int k) {  // exactly the draw sampled AR makes from this row
    stats_.target_rows++;
    return draws_.sample(std::span<const float>(rows_.data() + int64_t(k) * V, size_t(V)), cfg_.sampler);
  };
  for (int k = 0; k < D; ++k) {
    const int32_t t = sample_row(k);  // the token AR would have sampled here
    if (t != drafts_[size_t(k)]) {
      out.bonus = t;
      stats_.corrections++;
      return false;
    }
    out.accepted.push_back(t);
    stats_.accepted++;
    if (is_stop(t)) return true;
  }
  if (int64_t(D) >= budget) return true;
  out.bonus = sample_row(D);
  stats_.bonus++;
  return false;
}

std::vector<int32_t> generate_sampled(Model& model, std::unique_ptr<ModelState>& state, std::vector<float> logits,
                                      int64_t max_tokens, std::span<const int32_t> eos, const SpecConfig& config,
                                      SpecStats* stats, std::function<void(std::vector<int32_t>&)> corrupt) {
  std::vector<int32_t> out;
  if (max_tokens <= 0) return out;
  // Seeded from params.seed: numpy.random.default_rng(seed) as MTPLX seeds a turn, or ds4's
  // xorshift64* state.
  Sampler sampler(config.sampler_kind, config.sampler);
  auto stop = [&](int32_t t) { return std::find(eos.begin(), eos.end(), t) != eos.end(); };
  int32_t t = sampler.sample(logits);  // MTPLX's first primary
  if (config.depth <= 0) {  // generate_ar
    for (;;) {
      out.push_back(t);
      if (stop(t) || int64_t(out.size()) >= max_tokens) return out;
      model.forward(*state, std::span<const int32_t>(&t, 1), Logits::kLast, logits);
      t = sampler.sample(logits);
    }
  }
  SpecDecoder spec(model, config, SpecDraws::of(sampler));
  spec.corrupt_draft = std::move(corrupt);
  SpecCycle c;
  for (;;) {
    out.push_back(t);
    if (stop(t) || int64_t(out.size()) >= max_tokens) break;
    spec.cycle(state, t, max_tokens - int64_t(out.size()), eos, c);
    out.insert(out.end(), c.accepted.begin(), c.accepted.end());
    if (c.bonus < 0) break;
    t = c.bonus;  // MTPLX pending_primary: already drawn, fed by the next cycle
  }
  if (stats) stats->add(spec.stats());
  return out;
}

}  // namespace ds4::engine
