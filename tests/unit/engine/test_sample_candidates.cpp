// Sampling from a row's top candidates (models/sample_candidates.h, Sampler::sample_from)
// must give the token sampling the full row gives, draw for draw (same RNG stream), for both
// samplers, and fall back (nullopt, no draw) exactly where the candidates cannot decide it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "engine/sampler.h"
#include "models/sample_candidates.h"

using namespace ds4;
using namespace ds4::engine;

namespace {

enum class RowKind { kNormal, kTies, kSpecials, kFlat, kNoFinite, kPeaked };

std::vector<float> make_row(std::mt19937_64& g, size_t vocab, RowKind kind, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> r(vocab);
  for (auto& x : r) x = nd(g);
  switch (kind) {
    case RowKind::kNormal: break;
    case RowKind::kTies:  // few distinct values: ties everywhere, at every cut
      for (auto& x : r) x = std::round(x * 2.0f) / 2.0f;
      break;
    case RowKind::kSpecials: {
      std::uniform_int_distribution<size_t> at(0, vocab - 1);
      for (int i = 0; i < 1 + int(vocab / 20); ++i) r[at(g)] = -INFINITY;
      r[at(g)] = NAN;
      r[at(g)] = -0.0f;
      r[at(g)] = 0.0f;
      break;
    }
    case RowKind::kFlat: std::fill(r.begin(), r.end(), 1.5f); break;
    case RowKind::kNoFinite:
      for (size_t i = 0; i < vocab; ++i) r[i] = i % 3 == 0 ? NAN : -INFINITY;
      break;
    case RowKind::kPeaked:  // a few tokens far above the rest: narrow min-p / top-p cuts
      for (int i = 0; i < 3; ++i) r[std::uniform_int_distribution<size_t>(0, vocab - 1)(g)] += 12.0f + float(i);
      break;
  }
  return r;
}

std::string describe(SamplerKind kind, const SamplerParams& p, size_t vocab, int k, int row_kind) {
  std::ostringstream s;
  s << sampler_kind_name(kind) << " T=" << p.temperature << " top_k=" << p.top_k << " top_p=" << p.top_p
    << " min_p=" << p.min_p << " seed=" << p.seed << " vocab=" << vocab << " k=" << k << " row_kind=" << row_kind;
  return s.str();
}

struct Counts {
  int from_candidates = 0, fallback = 0;
};

// `draws` draws on the same row from two samplers with the same seed: one on the full row,
// one from candidates (falling back to the row when told to). Tokens and ds4 RNG states equal.
// exp_sum_scale != 1: the normaliser as a GPU might give it (another order, other exp bits).
Counts compare(SamplerKind kind, const SamplerParams& p, const std::vector<float>& row, int k, int row_kind,
               int draws = 4, double exp_sum_temperature = 0, double exp_sum_scale = 1) {
  Sampler full(kind, p), cand(kind, p);
  SampleCandidates c;
  top_candidates(row, CandidateRequest{k, exp_sum_temperature}, c);
  c.exp_sum *= exp_sum_scale;
  Counts n;
  for (int d = 0; d < draws; ++d) {
    const int32_t want = full.sample(row);
    const uint64_t rng_before = cand.ds4_rng_state();
    std::optional<int32_t> got = cand.sample_from(c);
    if (got) {
      n.from_candidates++;
    } else {
      EXPECT_EQ(cand.ds4_rng_state(), rng_before) << "a fallback drew: " << describe(kind, p, row.size(), k, row_kind);
      n.fallback++;
      got = cand.sample(row);
    }
    EXPECT_EQ(*got, want) << "draw " << d << ": " << describe(kind, p, row.size(), k, row_kind);
    EXPECT_EQ(cand.ds4_rng_state(), full.ds4_rng_state()) << describe(kind, p, row.size(), k, row_kind);
    EXPECT_EQ(cand.pcg().next_u64(), full.pcg().next_u64()) << "PCG64 streams apart: " << describe(kind, p, row.size(), k, row_kind);
    if (*got != want) return n;
  }
  return n;
}

}  // namespace

TEST(SampleCandidates, HostTopCandidatesOrderTiesAndSpecials) {
  const std::vector<float> row = {1.0f, 3.0f, NAN, 3.0f, -INFINITY, INFINITY, -0.0f, 0.0f, 2.0f};
  SampleCandidates c;
  top_candidates(row, 5, c);
  EXPECT_EQ(c.argmax, 5);  // +inf wins the argmax but is no candidate (not finite)
  EXPECT_EQ(c.finite, 6);
  EXPECT_EQ(c.vocab, 9);
  EXPECT_EQ(c.ids, (std::vector<int32_t>{1, 3, 8, 0, 6}));  // -0 and +0 tie: lower id first
  EXPECT_FALSE(c.complete());
  top_candidates(row, 64, c);
  EXPECT_TRUE(c.complete());
  const std::vector<float> none = {NAN, -INFINITY, NAN};
  top_candidates(none, 4, c);
  EXPECT_EQ(c.argmax, 0);
  EXPECT_EQ(c.finite, 0);
  EXPECT_TRUE(c.ids.empty());
}

// Both paths of top_candidates (greedy's one pass at k = 1, the partial sort above) against
// the definition (every finite id, sorted by value descending then id) on rows full of ties,
// signed zeros and non-finite values, k from 1 past the row's finite count, up to a
// 129,280-entry row (DeepSeek's vocabulary).
TEST(SampleCandidates, HostTopCandidatesEqualTheSortedDefinition) {
  std::mt19937_64 g(11);
  auto reference = [](const std::vector<float>& row, int k) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < row.size(); ++i)
      if (std::isfinite(row[i])) ids.push_back(int32_t(i));
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
    ids.resize(std::min(ids.size(), size_t(k)));
    return ids;
  };
  for (const size_t n : {size_t(1), size_t(7), size_t(300), size_t(129280)}) {
    std::vector<float> row(n);
    for (int trial = 0; trial < 4; ++trial) {
      for (float& v : row) {
        const uint64_t r = g() % 100;
        v = r < 3 ? NAN : r < 5 ? -INFINITY : r < 6 ? INFINITY : r < 8 ? -0.0f : r < 10 ? 0.0f
            : float(int(g() % 9) - 4) * 0.5f;  // few distinct values: many ties
      }
      for (const int k : {1, 2, 5, 40, 64, 1024, int(n) + 3}) {
        SampleCandidates c;
        top_candidates(row, k, c);
        const std::vector<int32_t> want = reference(row, k);
        ASSERT_EQ(c.ids, want) << "n " << n << " k " << k;
        ASSERT_EQ(c.logits.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(c.logits[i], row[size_t(want[i])]);
      }
    }
  }
}

TEST(SampleCandidates, Ds4SameTokensAsFullRow) {
  std::mt19937_64 g(7);
  const size_t vocabs[] = {1, 2, 9, 300, 3000};
  const double temps[] = {0.0, 0.25, 1.0, 2.5};
  const int top_ks[] = {0, 1, 4, 40, 300, 1024, 5000};
  const double top_ps[] = {1.0, 0.9, 0.3};
  const double min_ps[] = {0.0, 0.05, 0.4};
  Counts total;
  int topk_fallbacks = 0;
  for (size_t vocab : vocabs)
    for (int rk = 0; rk < 6; ++rk) {
      const auto row = make_row(g, vocab, RowKind(rk), rk == 5 ? 1.0f : (vocab % 2 ? 3.0f : 0.7f));
      for (double t : temps)
        for (int top_k : top_ks)
          for (double top_p : top_ps)
            for (double min_p : min_ps) {
              SamplerParams p{t, top_p, top_k, min_p, uint64_t(g() % 1000)};
              const int want_k = Sampler(SamplerKind::kDs4, p).candidates_k(16);
              // The k the engine would ask for, and smaller ones (fallbacks must be exact too).
              for (int k : {want_k, 1, 3, 16}) {
                if (k <= 0) continue;
                Counts n = compare(SamplerKind::kDs4, p, row, k, rk);
                total.from_candidates += n.from_candidates;
                total.fallback += n.fallback;
                // Greedy and a top-k the candidates cover never need the row.
                if (k == want_k && (t <= 0 || top_k > 0)) topk_fallbacks += n.fallback;
              }
            }
    }
  EXPECT_EQ(topk_fallbacks, 0);
  EXPECT_GT(total.from_candidates, 1000);
  EXPECT_GT(total.fallback, 100);  // top-p over the whole vocabulary, narrow k, ...
}

TEST(SampleCandidates, Ds4MinPWithoutTopKUsesCandidatesWhenTheCutIsNarrow) {
  // ds4-server defaults (T 1, top-p 1, min-p 0.05, top-k 0) on a peaked row: the tokens above
  // min-p are few, so 256 candidates decide the draw without the 151k row.
  std::mt19937_64 g(11);
  Counts n;
  for (int i = 0; i < 20; ++i) {
    const auto row = make_row(g, 20000, RowKind::kPeaked, 1.0f);
    SamplerParams p = default_sampler_params(SamplerKind::kDs4);
    p.seed = uint64_t(i);
    Counts c = compare(SamplerKind::kDs4, p, row, Sampler(SamplerKind::kDs4, p).candidates_k(256), 5, 8);
    n.from_candidates += c.from_candidates, n.fallback += c.fallback;
  }
  EXPECT_EQ(n.fallback, 0);
  EXPECT_EQ(n.from_candidates, 160);
  // A flat row: every token is above min-p; 256 candidates cannot decide it.
  const auto flat = make_row(g, 20000, RowKind::kFlat, 1.0f);
  SamplerParams p = default_sampler_params(SamplerKind::kDs4);
  Counts c = compare(SamplerKind::kDs4, p, flat, 256, 3, 3);
  EXPECT_EQ(c.from_candidates, 0);
  EXPECT_EQ(c.fallback, 3);
}

TEST(SampleCandidates, MtplxSameTokensAsFullRow) {
  std::mt19937_64 g(5);
  Counts greedy, sampled, perturbed;
  for (size_t vocab : {1, 2, 50, 3000})
    for (int rk : {0, 1, 2, 3, 5}) {
      const auto row = make_row(g, vocab, RowKind(rk), rk == 5 ? 1.0f : 2.0f);
      const bool finite = std::all_of(row.begin(), row.end(), [](float x) { return std::isfinite(x); });
      for (double t : {0.0, 0.6, 1.0})
        for (int top_k : {0, 1, 20, 64})
          for (double top_p : {1.0, 0.95, 0.5}) {
            if (t > 0 && !finite) continue;  // MTPLX rejects a NaN row outright (both paths)
            SamplerParams p{t, top_p, top_k, 0.0, uint64_t(g() % 1000)};
            const CandidateRequest req = Sampler(SamplerKind::kMtplx, p).candidates_request();
            for (int k : {std::max(req.k, 1), 20, 1}) {
              Counts n = compare(SamplerKind::kMtplx, p, row, k, rk, 8, req.exp_sum_temperature);
              (t <= 0 ? greedy : sampled).from_candidates += n.from_candidates;
              (t <= 0 ? greedy : sampled).fallback += n.fallback;
              if (t <= 0 && finite) EXPECT_EQ(n.fallback, 0) << "greedy on a finite row decides from candidates";
              // The normaliser off by a relative 1e-11 either way (more than a GPU sum is):
              // still the row's tokens, or a fallback.
              for (double scale : {1 + 1e-11, 1 - 1e-11}) {
                Counts m = compare(SamplerKind::kMtplx, p, row, k, rk, 8, req.exp_sum_temperature, scale);
                perturbed.from_candidates += m.from_candidates;
                perturbed.fallback += m.fallback;
              }
            }
          }
    }
  EXPECT_GT(greedy.from_candidates, 100);
  EXPECT_GT(greedy.fallback, 0);            // rows with NaN / inf
  EXPECT_GT(sampled.from_candidates, 200);  // top-k with the normaliser
  EXPECT_GT(sampled.fallback, 100);         // no top-k, too few candidates, ties at the cut
  EXPECT_GT(perturbed.from_candidates, 200);
}

TEST(SampleCandidates, CandidatesKPerSetting) {
  SamplerParams p = default_sampler_params(SamplerKind::kDs4);
  EXPECT_EQ(Sampler(SamplerKind::kDs4, p).candidates_k(256), 256);  // min-p 0.05, top-p 1
  p.top_p = 0.9;
  EXPECT_EQ(Sampler(SamplerKind::kDs4, p).candidates_k(256), 0);    // whole-vocab top-p sum
  p.top_k = 40;
  EXPECT_EQ(Sampler(SamplerKind::kDs4, p).candidates_k(256), 40);
  p.top_k = 4000;
  EXPECT_EQ(Sampler(SamplerKind::kDs4, p).candidates_k(256), 1024);  // ds4's cap
  p.temperature = 0;
  EXPECT_EQ(Sampler(SamplerKind::kDs4, p).candidates_k(256), 1);
  SamplerParams q = default_sampler_params(SamplerKind::kMtplx);  // T 1, top-p 0.95, top-k 20
  EXPECT_EQ(Sampler(SamplerKind::kMtplx, q).candidates_k(), 52);
  EXPECT_EQ(Sampler(SamplerKind::kMtplx, q).candidates_request().exp_sum_temperature, 1.0);
  q.top_k = 0;
  EXPECT_EQ(Sampler(SamplerKind::kMtplx, q).candidates_k(), 0);
  q.temperature = 0;
  EXPECT_EQ(Sampler(SamplerKind::kMtplx, q).candidates_k(), 1);
}

// The engine's decode steps through Model::forward_candidates (here the host default on the
// scripted test model): same answer as with the full row every step, and the usage says
// which path each draw took.
#include "engine_test_util.h"

namespace ds4::engine {

TEST(SampleCandidates, EngineSameAnswerAndCountsThePath) {
  struct Case {
    const char* family;
    double temperature;
    bool expect_candidates;
    bool decided;  // the candidates decide the draws (else every one falls back, counted)
  };
  // The scripted row is 20 on one token and 0 on the other 299: MTPLX's top-20 cut falls in
  // a tie that runs past the candidates, so its sampled draws need the row.
  for (Case c : {Case{"qwen_test", 0.0, true, true}, Case{"qwen_test", 1.0, true, false},
                 Case{"deepseek_test", 1.0, true, true}, Case{"deepseek_test", 0.0, true, true}}) {
    std::string answers[2];
    for (int on = 0; on < 2; ++on) {
      EngineOptions o;
      o.sample_candidates = on == 1;
      auto e = make_engine({}, c.family, o);
      auto req = chat({user("hello")});
      req.sampler = default_sampler_params(sampler_kind_for_family(c.family));
      req.sampler.temperature = c.temperature;
      auto r = collect(*e->submit(req));
      answers[on] = r.content;
      const Usage& u = r.done.usage;
      const int64_t decode_draws = u.completion_tokens - 1;  // the first comes from the prefill row
      if (on && c.expect_candidates) {
        EXPECT_EQ(u.sampled_from_candidates + u.sampled_full_fallback, decode_draws) << c.family;
        if (c.decided) EXPECT_GT(u.sampled_from_candidates, 0) << c.family << " T=" << c.temperature;
        else EXPECT_EQ(u.sampled_from_candidates, 0) << c.family << " T=" << c.temperature;
        EXPECT_EQ(e->metrics().sampled_from_candidates, uint64_t(u.sampled_from_candidates));
      } else {
        EXPECT_EQ(u.sampled_from_candidates + u.sampled_full_fallback, 0) << c.family << " on=" << on;
      }
    }
    EXPECT_EQ(answers[0], answers[1]) << c.family << " T=" << c.temperature;
    EXPECT_FALSE(answers[1].empty());
  }
}

}  // namespace ds4::engine
