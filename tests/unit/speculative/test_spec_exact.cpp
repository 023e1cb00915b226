// Stochastic speculative decoding (categories exact and opportunistic) on a tiny Markov-chain
// "model" whose exact output law is known: exact mode must reproduce the target's law
// (chi-square over many fixed seeds), not the draft head's; opportunistic mode must emit
// exactly the sampled AR stream. Plus the per-turn category and DSpark-gate rules.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>

#include "engine/speculative.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::engine {
namespace {

constexpr int kV = 6;
using Table = std::array<std::array<float, kV>, kV>;  // {previous token, next-token logit}

// Target and draft transition logits: different enough that the draft is often rejected.
constexpr Table kTarget = {{{1.2f, 0.1f, -0.5f, 0.8f, -1.0f, 0.3f},
                            {-0.4f, 0.9f, 0.6f, -1.2f, 0.2f, 0.0f},
                            {0.5f, -0.8f, 1.1f, 0.4f, -0.3f, -0.6f},
                            {0.0f, 0.7f, -0.9f, 0.2f, 1.0f, -0.2f},
                            {-1.1f, 0.3f, 0.4f, 0.9f, -0.2f, 0.6f},
                            {0.6f, -0.1f, 0.0f, -0.7f, 0.5f, 1.3f}}};
constexpr Table kDraft = {{{0.2f, 1.0f, -0.5f, 0.1f, 0.4f, -0.9f},
                           {0.9f, -0.3f, 0.6f, 0.2f, -1.0f, 0.5f},
                           {-0.7f, 0.4f, 0.3f, 1.2f, 0.0f, -0.2f},
                           {1.1f, -0.6f, 0.2f, -0.4f, 0.3f, 0.8f},
                           {0.0f, 0.9f, -1.0f, 0.5f, 0.7f, -0.3f},
                           {-0.2f, 0.6f, 1.0f, 0.3f, -0.8f, 0.1f}}};

struct ChainState : ModelState {
  std::vector<int32_t> toks;
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<ChainState>(*this); }
  int64_t position() const override { return int64_t(toks.size()); }
  size_t bytes() const override { return toks.size() * sizeof(int32_t); }
};

class ChainModel : public Model, public DraftHead {
 public:
  explicit ChainModel(const Table& draft) : draft_(draft) {
    info_.family = "test_chain";
    info_.name = "chain";
    info_.vocab_size = kV;
    info_.max_context = 1 << 20;
    info_.has_draft_head = true;
  }
  const ModelInfo& info() const override { return info_; }
  std::unique_ptr<ModelState> new_state() const override { return std::make_unique<ChainState>(); }
  void forward(ModelState& state, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override {
    auto& st = dynamic_cast<ChainState&>(state);
    logits.clear();
    for (size_t i = 0; i < tokens.size(); ++i) {
      st.toks.push_back(tokens[i]);
      if (mode == Logits::kAll || (mode == Logits::kLast && i + 1 == tokens.size()))
        logits.insert(logits.end(), kTarget[size_t(tokens[i])].begin(), kTarget[size_t(tokens[i])].end());
    }
  }
  DraftHead* draft_head() override { return this; }
  void enable_draft(ModelState&) const override {}
  void draft(ModelState& s, int32_t next, int depth, std::vector<int32_t>& drafts) override {
    draft_picked(s, next, depth, Pick{}, drafts);
  }
  bool draft_picked(ModelState&, int32_t next, int depth, const Pick& pick, std::vector<int32_t>& drafts) override {
    drafts.clear();
    int32_t prev = next;
    for (int k = 0; k < depth; ++k) {
      std::span<const float> row(draft_[size_t(prev)].data(), kV);
      prev = pick && picks_ ? pick(row) : int32_t(std::max_element(row.begin(), row.end()) - row.begin());
      drafts.push_back(prev);
    }
    return picks_;
  }
  bool picks_ = true;  // false: a greedy-only head (drafts are argmax, the pick is not used)

 private:
  Table draft_;
  ModelInfo info_;
};

// The law of the sampled chain under `p`'s sampler: row t = filtered distribution after t.
std::array<std::array<double, kV>, kV> law(const SamplerParams& p, SamplerKind kind = SamplerKind::kMtplx) {
  std::array<std::array<double, kV>, kV> m{};
  for (int t = 0; t < kV; ++t)
    if (kind == SamplerKind::kDs4) ds4_distribution(kTarget[size_t(t)], p, m[size_t(t)]);
    else mtplx_distribution(kTarget[size_t(t)], p, m[size_t(t)]);
  return m;
}

struct Counts {
  std::array<double, kV * kV> pair{};  // (x3, x4): tokens produced by speculative cycles
  SpecStats stats;
};

Counts run_many(ChainModel& m, const SamplerParams& p, SpecCategory cat, int depth, int seeds,
                SamplerKind kind = SamplerKind::kMtplx) {
  Counts c;
  for (int s = 0; s < seeds; ++s) {
    SpecConfig cfg;
    cfg.depth = depth;
    cfg.category = cat;
    cfg.sampler = p;
    cfg.sampler_kind = kind;
    cfg.sampler.seed = uint64_t(1000 + s);
    auto st = m.new_state();
    auto logits = m.prefill(*st, std::vector<int32_t>{0});
    auto out = generate_sampled(m, st, logits, 4, {}, cfg, &c.stats);
    EXPECT_EQ(out.size(), 4u);
    c.pair[size_t(out[2] * kV + out[3])] += 1;
  }
  return c;
}

// Pearson chi-square of observed pair counts against the chain's (x3, x4) law started after
// token 0 under transition matrix `t`. Cells with zero expected mass must stay empty.
double chi_square(const Counts& c, const std::array<std::array<double, kV>, kV>& t, int n) {
  std::array<double, kV> x = t[0];  // law of x1
  for (int step = 0; step < 2; ++step) {  // -> x2 -> x3
    std::array<double, kV> y{};
    for (int a = 0; a < kV; ++a)
      for (int b = 0; b < kV; ++b) y[size_t(b)] += x[size_t(a)] * t[size_t(a)][size_t(b)];
    x = y;
  }
  double chi = 0;
  for (int a = 0; a < kV; ++a)
    for (int b = 0; b < kV; ++b) {
      const double e = n * x[size_t(a)] * t[size_t(a)][size_t(b)], o = c.pair[size_t(a * kV + b)];
      if (e == 0) {
        if (o > 0) return INFINITY;
        continue;
      }
      chi += (o - e) * (o - e) / e;
    }
  return chi;
}

// 36 cells -> at most 35 degrees of freedom; chi-square(35) exceeds 66.6 with probability
// 0.001. Seeds are fixed, so the statistic is a fixed number: the test cannot flake.
constexpr double kChi35p001 = 66.6;
constexpr int kSeeds = 20000;

SamplerParams full_softmax() {
  SamplerParams p;
  p.temperature = 1.0;
  p.top_p = 1.0;
  p.top_k = 0;
  return p;
}

SamplerParams filtered() {  // top-k and top-p cut the support, as the product default does
  SamplerParams p;
  p.temperature = 0.8;
  p.top_p = 0.9;
  p.top_k = 4;
  return p;
}

TEST(SpecExact, PreservesTargetLawFullSoftmax) {
  ChainModel m(kDraft);
  for (int depth : {1, 2, 3}) {
    const Counts c = run_many(m, full_softmax(), SpecCategory::kExact, depth, kSeeds);
    const double chi = chi_square(c, law(full_softmax()), kSeeds);
    EXPECT_LT(chi, kChi35p001) << "depth " << depth;
    std::printf("depth %d: chi-square %.1f (35 dof), acceptance %.3f\n", depth, chi, c.stats.acceptance());
    // The walk really ran every path: rejections (residual draws) and full acceptances.
    EXPECT_GT(c.stats.corrections, kSeeds / 10);
    // Depth 3 fills the 3-token budget after x1: no bonus draw there (MTPLX cycle_depth).
    if (depth < 3) EXPECT_GT(c.stats.bonus, kSeeds / 50);
    else EXPECT_EQ(c.stats.bonus, 0);
    EXPECT_LT(c.stats.acceptance(), 0.9);
    // Power: the same counts are far from the draft head's own law.
    std::array<std::array<double, kV>, kV> q{};
    for (int t = 0; t < kV; ++t) mtplx_distribution(kDraft[size_t(t)], full_softmax(), q[size_t(t)]);
    EXPECT_GT(chi_square(c, q, kSeeds), 50 * kChi35p001);
  }
}

TEST(SpecExact, PreservesTargetLawTopKTopP) {
  ChainModel m(kDraft);
  const Counts c = run_many(m, filtered(), SpecCategory::kExact, 2, kSeeds);
  const double chi = chi_square(c, law(filtered()), kSeeds);
  EXPECT_LT(chi, kChi35p001);
  std::printf("top-k/top-p: chi-square %.1f, acceptance %.3f\n", chi, c.stats.acceptance());
  EXPECT_GT(c.stats.corrections, kSeeds / 10);
}

TEST(SpecExact, GreedyOnlyHeadIsAPointMassProposal) {
  // A head that cannot pick drafts greedily; exact treats them as q = one-hot (MTPLX with a
  // greedy draft sampler): still the target's law, and no draft draws.
  ChainModel m(kDraft);
  m.picks_ = false;
  const Counts c = run_many(m, filtered(), SpecCategory::kExact, 2, kSeeds);
  const double chi = chi_square(c, law(filtered()), kSeeds);
  EXPECT_LT(chi, kChi35p001);
  EXPECT_GT(c.stats.corrections, kSeeds / 10);
  std::printf("greedy-only head: chi-square %.1f, acceptance %.3f\n", chi, c.stats.acceptance());
}

TEST(SpecExact, PreservesTargetLawDs4Sampler) {
  // The same walk on ds4's sampler (GLM / DeepSeek turns): its distribution (float weights,
  // min-p, top-p on raw sums) and its xorshift64* stream, with drafts picked from q and with
  // a greedy-only head.
  SamplerParams p = default_sampler_params(SamplerKind::kDs4);  // T 1, top-p 1, min-p 0.05
  p.top_k = 5;
  for (bool picks : {true, false}) {
    ChainModel m(kDraft);
    m.picks_ = picks;
    const Counts c = run_many(m, p, SpecCategory::kExact, 2, kSeeds, SamplerKind::kDs4);
    const double chi = chi_square(c, law(p, SamplerKind::kDs4), kSeeds);
    EXPECT_LT(chi, kChi35p001) << "picks " << picks;
    EXPECT_GT(c.stats.corrections, kSeeds / 10);
    std::printf("ds4 sampler, picks %d: chi-square %.1f, acceptance %.3f\n", int(picks), chi, c.stats.acceptance());
    // Power: the same counts are far from the draft head's own law q.
    std::array<std::array<double, kV>, kV> q{};
    for (int t = 0; t < kV; ++t) ds4_distribution(kDraft[size_t(t)], p, q[size_t(t)]);
    EXPECT_GT(chi_square(c, q, kSeeds), 50 * kChi35p001);
  }
}

TEST(SpecExact, Ds4DistributionIsWhatDs4SampleDraws) {
  // ds4_distribution is the law of ds4_sample: 200k draws per row, chi-square per row (5 dof
  // at most: 20.5 at p = 0.001), for a top-k, a top-p and a full-vocabulary min-p setting.
  SamplerParams a = default_sampler_params(SamplerKind::kDs4), b = a, c = a;
  a.top_k = 4;
  b.top_p = 0.7;
  c.min_p = 0.3;
  for (const SamplerParams& p : {a, b, c})
    for (int t = 0; t < kV; ++t) {
      std::array<double, kV> d{}, n{};
      ds4_distribution(kTarget[size_t(t)], p, d);
      Ds4Rng rng(uint64_t(77 + t));
      const int N = 200000;
      for (int i = 0; i < N; ++i) n[size_t(ds4_sample(kTarget[size_t(t)], p, rng))] += 1;
      double chi = 0;
      for (int v = 0; v < kV; ++v) {
        if (d[size_t(v)] == 0) {
          EXPECT_EQ(n[size_t(v)], 0) << "row " << t << " id " << v;
          continue;
        }
        const double e = N * d[size_t(v)];
        chi += (n[size_t(v)] - e) * (n[size_t(v)] - e) / e;
      }
      EXPECT_LT(chi, 20.5) << "row " << t;
    }
}

TEST(SpecExact, DraftEqualToTargetIsAlwaysAccepted) {
  ChainModel m(kTarget);  // q == p: min(1, p/q) = 1, every u <= 1 accepts
  const Counts c = run_many(m, filtered(), SpecCategory::kExact, 3, 500);
  EXPECT_EQ(c.stats.accepted, c.stats.drafted);
  EXPECT_EQ(c.stats.corrections, 0);
  EXPECT_GT(c.stats.drafted, 0);
}

// Sampled AR and opportunistic (depth 3) on the chain from token 0 with `kind`'s sampler:
// asserts the streams and end states are equal and returns the stream.
std::vector<int32_t> opportunistic_vs_ar(ChainModel& m, const SamplerParams& p, SamplerKind kind, uint64_t seed) {
  SpecConfig ar;
  ar.depth = 0;
  ar.sampler = p;
  ar.sampler.seed = seed;
  ar.sampler_kind = kind;
  SpecConfig op = ar;
  op.depth = 3;
  op.category = SpecCategory::kOpportunistic;
  auto s0 = m.new_state(), s1 = m.new_state();
  auto l0 = m.prefill(*s0, std::vector<int32_t>{0}), l1 = m.prefill(*s1, std::vector<int32_t>{0});
  const std::vector<int32_t> eos = {5};
  auto a = generate_sampled(m, s0, l0, 30, eos, ar);
  auto b = generate_sampled(m, s1, l1, 30, eos, op);
  EXPECT_EQ(a, b) << "seed " << seed;
  EXPECT_EQ(s0->position(), s1->position()) << "seed " << seed;
  return a;
}

TEST(SpecExact, OpportunisticEmitsTheSampledArStream) {
  // Each verify row samples the token AR samples at that position, in AR's draw order, so
  // the emitted stream equals sampled AR token for token (same seed).
  ChainModel m(kDraft);
  for (uint64_t seed = 1; seed <= 200; ++seed) opportunistic_vs_ar(m, filtered(), SamplerKind::kMtplx, seed);
}

TEST(SpecExact, OpportunisticEmitsTheSampledArStreamDs4Sampler) {
  ChainModel m(kDraft);
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const auto a = opportunistic_vs_ar(m, default_sampler_params(SamplerKind::kDs4), SamplerKind::kDs4, seed);
    // ds4's own sampled loop is the reference: Sampler(kDs4) draw by draw.
    SamplerParams p = default_sampler_params(SamplerKind::kDs4);
    p.seed = seed;
    Sampler ref(SamplerKind::kDs4, p);
    std::vector<int32_t> want;
    int32_t t = ref.sample(kTarget[0]);
    for (;;) {
      want.push_back(t);
      if (t == 5 || want.size() >= 30) break;
      t = ref.sample(kTarget[size_t(t)]);
    }
    ASSERT_EQ(a, want) << "seed " << seed;
  }
}

TEST(SpecExact, StopsOnAcceptedEosAndBudgetLikeAr) {
  // Whatever the walk does, a turn ends at the first stop token (kept) or at max_tokens, and
  // the state holds every emitted token but the last, exactly like AR.
  ChainModel m(kTarget);  // all drafts accepted: stops fall inside accepted drafts
  for (uint64_t seed = 1; seed <= 100; ++seed)
    for (int64_t max_tokens : {1, 2, 3, 4, 7}) {
      SpecConfig cfg;
      cfg.depth = 3;
      cfg.category = SpecCategory::kExact;
      cfg.sampler = filtered();
      cfg.sampler.seed = seed;
      auto st = m.new_state();
      auto l = m.prefill(*st, std::vector<int32_t>{0});
      const std::vector<int32_t> eos = {4};
      auto out = generate_sampled(m, st, l, max_tokens, eos, cfg);
      ASSERT_FALSE(out.empty());
      ASSERT_LE(int64_t(out.size()), max_tokens);
      for (size_t i = 0; i + 1 < out.size(); ++i) ASSERT_NE(out[i], 4);
      if (int64_t(out.size()) < max_tokens) {
        ASSERT_EQ(out.back(), 4);
      }
      EXPECT_EQ(st->position(), 1 + int64_t(out.size()) - 1);  // prompt + all but the last
    }
}

TEST(SpecCategoryRules, PerTurnCategory) {
  SamplerParams greedy;
  greedy.temperature = 0;
  SamplerParams sampled;
  sampled.temperature = 0.7;
  EXPECT_EQ(resolve_spec_category(false, sampled, SpecCategory::kExact), SpecCategory::kTargetOnly);
  EXPECT_EQ(resolve_spec_category(true, greedy, SpecCategory::kExact), SpecCategory::kGreedy);
  EXPECT_EQ(resolve_spec_category(true, sampled, SpecCategory::kExact), SpecCategory::kExact);
  EXPECT_EQ(resolve_spec_category(true, sampled, SpecCategory::kOpportunistic), SpecCategory::kOpportunistic);
  EXPECT_EQ(resolve_spec_category(true, sampled, SpecCategory::kTargetOnly), SpecCategory::kTargetOnly);
  EXPECT_THROW(resolve_spec_category(true, sampled, SpecCategory::kGreedy), InputError);
  EXPECT_EQ(parse_spec_category("exact"), SpecCategory::kExact);
  EXPECT_STREQ(spec_category_name(SpecCategory::kOpportunistic), "opportunistic");
  EXPECT_THROW(parse_spec_category("strict-ish"), InputError);
}

TEST(SpecCategoryRules, DsparkConfidenceGate) {
  // Unset: 0.6, raised to 0.8 only for a stochastic exact turn.
  EXPECT_DOUBLE_EQ(resolve_dspark_confidence(std::nullopt, SpecCategory::kGreedy), 0.6);
  EXPECT_DOUBLE_EQ(resolve_dspark_confidence(std::nullopt, SpecCategory::kOpportunistic), 0.6);
  EXPECT_DOUBLE_EQ(resolve_dspark_confidence(std::nullopt, SpecCategory::kTargetOnly), 0.6);
  EXPECT_DOUBLE_EQ(resolve_dspark_confidence(std::nullopt, SpecCategory::kExact), 0.8);
  // Explicit values are kept as given, in every category, 0 included.
  for (SpecCategory c : {SpecCategory::kGreedy, SpecCategory::kExact, SpecCategory::kOpportunistic}) {
    EXPECT_DOUBLE_EQ(resolve_dspark_confidence(0.0, c), 0.0);
    EXPECT_DOUBLE_EQ(resolve_dspark_confidence(0.3, c), 0.3);
    EXPECT_DOUBLE_EQ(resolve_dspark_confidence(1.0, c), 1.0);
  }
  // Per turn: the same unset setting resolves differently for a greedy and an exact turn.
  SamplerParams greedy, sampled;
  greedy.temperature = 0;
  sampled.temperature = 1;
  EXPECT_DOUBLE_EQ(resolve_dspark_confidence(std::nullopt, resolve_spec_category(true, greedy, SpecCategory::kExact)),
                   0.6);
  EXPECT_DOUBLE_EQ(resolve_dspark_confidence(std::nullopt, resolve_spec_category(true, sampled, SpecCategory::kExact)),
                   0.8);
  EXPECT_THROW(resolve_dspark_confidence(1.5, SpecCategory::kExact), InputError);
  EXPECT_THROW(resolve_dspark_confidence(-0.1, SpecCategory::kGreedy), InputError);
  EXPECT_THROW(resolve_dspark_confidence(std::nan(""), SpecCategory::kGreedy), InputError);
}

TEST(SpecCategoryRules, StochasticDecoderNeedsGeneratorAndTemperature) {
  ChainModel m(kDraft);
  SpecConfig cfg;
  cfg.category = SpecCategory::kExact;
  cfg.sampler = filtered();
  EXPECT_THROW(SpecDecoder(m, cfg, nullptr), InputError);
  Pcg64 rng(1);
  cfg.sampler.temperature = 0;
  EXPECT_THROW(SpecDecoder(m, cfg, &rng), InputError);
}

}  // namespace
}  // namespace ds4::engine
