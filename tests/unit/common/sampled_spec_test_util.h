#pragma once
// Sampled speculation checks shared by the families on ds4's sampler (GLM 5, DeepSeek V4):
// the generic walks of engine/speculative.h driven by a real tiny model and its draft head.
//   opportunistic  every verify row draws what sampled AR draws at that position, so the
//                  stream equals sampled AR token for token, with the head's own drafts,
//                  with a draft forced wrong at each position d (exactly d accepted per
//                  cycle, one correction), with every draft forced right (all accepted +
//                  bonus), and with a stop token inside a draft
//   exact          the law of the first tokens equals the target's (chi-square over many
//                  seeds against the law computed from AR forwards)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculative.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::draft_test {

struct SampledCase {
  Model* model = nullptr;
  std::vector<int32_t> prompt;
  double dspark_confidence = 0.0;  // heads with a gate: 0 keeps every draft
  // The prompt consumed once (with and without the head), cloned by every run.
  mutable std::shared_ptr<ModelState> base[2];
  mutable std::vector<float> base_logits[2];
};

// A copy of the case's prefilled state (head enabled or not) and its last logits.
inline std::unique_ptr<ModelState> prefilled(const SampledCase& sc, bool head, std::vector<float>& logits) {
  if (!sc.base[head]) {
    auto st = sc.model->new_state();
    if (head) sc.model->draft_head()->enable_draft(*st);
    sc.base_logits[head] = sc.model->prefill(*st, sc.prompt);
    sc.base[head] = std::move(st);
  }
  logits = sc.base_logits[head];
  return sc.base[head]->clone();
}

// A model whose draft head is the target itself, flattened: draft k is picked from the
// target's own logits after the drafts before it, times 0.5, so q has p's support but not
// its weights and the exact walk both accepts and rejects. Verify capture and commit are the
// real family's (the wrapped model's head): what the law test checks on a real model.
class OracleHeadModel : public Model, public DraftHead {
 public:
  explicit OracleHeadModel(Model& m) : m_(m) {}
  const ModelInfo& info() const override { return m_.info(); }
  std::unique_ptr<ModelState> new_state() const override { return m_.new_state(); }
  void forward(ModelState& s, std::span<const int32_t> t, Logits mode, std::vector<float>& lg) override {
    m_.forward(s, t, mode, lg);
  }
  DraftHead* draft_head() override { return this; }
  void enable_draft(ModelState& s) const override { m_.draft_head()->enable_draft(s); }
  void draft(ModelState& s, int32_t next, int depth, std::vector<int32_t>& drafts) override {
    draft_picked(s, next, depth, [](std::span<const float> r) { return int32_t(std::max_element(r.begin(), r.end()) - r.begin()); }, drafts);
  }
  bool draft_picked(ModelState& s, int32_t next, int depth, const Pick& pick, std::vector<int32_t>& drafts) override {
    auto c = s.clone();
    drafts.clear();
    int32_t tok = next;
    for (int k = 0; k < depth; ++k) {
      std::vector<float> lg = m_.decode(*c, tok);
      for (float& x : lg) x *= 0.5f;
      drafts.push_back(tok = pick(lg));
    }
    return true;
  }
  bool verify_capture(ModelState& s, std::span<const int32_t> t, std::vector<float>& lg) override {
    return m_.draft_head()->verify_capture(s, t, lg);
  }
  void commit_prefix(ModelState& s, int64_t keep) override { m_.draft_head()->commit_prefix(s, keep); }

 private:
  Model& m_;
};

inline engine::SamplerParams ds4_turn(uint64_t seed) {  // a filtered ds4 turn, like the product's
  engine::SamplerParams p = engine::default_sampler_params(engine::SamplerKind::kDs4);
  p.temperature = 0.9;
  p.top_k = 40;
  p.top_p = 0.95;
  p.seed = seed;
  return p;
}

struct SampledRun {
  std::vector<int32_t> tokens;
  engine::SpecStats stats;
  int64_t position = 0;
};

// One turn of `max_tokens` after the prompt: depth 0 = ds4's sampled AR loop.
inline SampledRun run_sampled(const SampledCase& sc, engine::SpecCategory cat, int depth, const engine::SamplerParams& p,
                              int64_t max_tokens, std::vector<int32_t> eos,
                              std::function<void(const ModelState&, std::vector<int32_t>&)> corrupt = {}) {
  Model& m = *sc.model;
  SampledRun r;
  std::vector<float> logits;
  auto st = prefilled(sc, depth > 0, logits);
  engine::SpecConfig cfg;
  cfg.depth = depth;
  cfg.category = cat;
  cfg.sampler = p;
  cfg.sampler_kind = engine::SamplerKind::kDs4;
  cfg.dspark_confidence = sc.dspark_confidence;
  std::function<void(std::vector<int32_t>&)> hook;
  if (corrupt) hook = [&](std::vector<int32_t>& d) { corrupt(*st, d); };
  r.tokens = engine::generate_sampled(m, st, logits, max_tokens, eos, cfg, &r.stats, hook);
  r.position = st->position();
  return r;
}

// Forces the drafts of every cycle from `ar` (the sampled AR stream): drafts before `wrong`
// equal AR's tokens, the draft at `wrong` differs from AR's (so the row's sample rejects it);
// wrong >= depth: every draft right.
inline std::function<void(const ModelState&, std::vector<int32_t>&)> force_from(const SampledCase& sc,
                                                                             const std::vector<int32_t>& ar,
                                                                             size_t wrong) {
  const size_t prompt = sc.prompt.size();
  const int32_t V = int32_t(sc.model->info().vocab_size);
  return [&ar, prompt, wrong, V](const ModelState& st, std::vector<int32_t>& d) {
    const size_t at = size_t(st.position()) - prompt + 1;  // index in `ar` of draft 0
    for (size_t k = 0; k < d.size() && at + k < ar.size(); ++k)
      d[k] = k == wrong ? (ar[at + k] + 1) % V : ar[at + k];
  };
}

inline void expect_opportunistic_equals_sampled_ar(const SampledCase& sc, int depth, int seeds) {
  using engine::SpecCategory;
  for (int s = 1; s <= seeds; ++s) {
    const auto p = ds4_turn(uint64_t(s));
    const SampledRun ar = run_sampled(sc, SpecCategory::kOpportunistic, 0, p, 20, {});
    const SampledRun own = run_sampled(sc, SpecCategory::kOpportunistic, depth, p, 20, {});
    EXPECT_EQ(own.tokens, ar.tokens) << "seed " << s;
    EXPECT_EQ(own.position, ar.position) << "seed " << s;
    EXPECT_GT(own.stats.drafted, 0);
    EXPECT_EQ(own.stats.repairs + own.stats.full_replays, 0);
    // A draft forced wrong at each position d: exactly d accepted per cycle (the last cycle
    // may be cut by the budget), one correction, never a bonus.
    for (int wrong = 0; wrong < depth; ++wrong) {
      const SampledRun f = run_sampled(sc, SpecCategory::kOpportunistic, depth, p, 20, {}, force_from(sc, ar.tokens, size_t(wrong)));
      EXPECT_EQ(f.tokens, ar.tokens) << "seed " << s << " wrong " << wrong;
      EXPECT_EQ(f.stats.bonus, 0);
      EXPECT_GE(f.stats.corrections, f.stats.cycles - 1);
      EXPECT_LE(f.stats.accepted, wrong * f.stats.cycles);
      EXPECT_GE(f.stats.accepted, wrong * (f.stats.cycles - 1));
      EXPECT_EQ(f.stats.repairs + f.stats.full_replays, 0);
      if (wrong > 0) {
        EXPECT_GT(f.stats.prefix_commits, 0);
      }
    }
    // Every draft right: all accepted plus the bonus row.
    const SampledRun all = run_sampled(sc, SpecCategory::kOpportunistic, depth, p, 20, {}, force_from(sc, ar.tokens, 99));
    EXPECT_EQ(all.tokens, ar.tokens) << "seed " << s;
    EXPECT_EQ(all.stats.accepted, all.stats.drafted);
    EXPECT_EQ(all.stats.corrections, 0);
    EXPECT_GE(all.stats.bonus, all.stats.cycles - 1);
    // A stop token inside a draft: the first AR token (after the first few) not seen before.
    for (size_t i = 3; i < ar.tokens.size(); ++i) {
      if (std::find(ar.tokens.begin(), ar.tokens.begin() + int64_t(i), ar.tokens[i]) != ar.tokens.begin() + int64_t(i))
        continue;
      const std::vector<int32_t> eos = {ar.tokens[i]};
      const SampledRun ar_e = run_sampled(sc, SpecCategory::kOpportunistic, 0, p, 20, eos);
      ASSERT_EQ(ar_e.tokens.size(), i + 1);
      const SampledRun sp_e =
          run_sampled(sc, SpecCategory::kOpportunistic, depth, p, 20, eos, force_from(sc, ar.tokens, 99));
      EXPECT_EQ(sp_e.tokens, ar_e.tokens) << "seed " << s;
      EXPECT_EQ(sp_e.position, ar_e.position) << "seed " << s;  // the stop token is not fed
      break;
    }
  }
}

// Exact: the law of (x1, x2, x3, x4) under a top-2 turn. The target law comes from AR
// forwards over every prefix (ds4_distribution of each row); the speculative counts from
// `seeds` fixed seeds, so the statistic is a fixed number and cannot flake. 16 cells: at most
// 15 degrees of freedom; chi-square(15) exceeds 37.7 with probability 0.001. A random head's
// drafts are rarely in the target's top 2 (every draft rejected: the residual path); with
// `must_accept` (an OracleHeadModel) both paths must have run.
inline void expect_exact_preserves_law(const SampledCase& sc, int depth, int seeds, bool must_accept = false) {
  Model& m = *sc.model;
  const int64_t V = m.info().vocab_size;
  engine::SamplerParams p = engine::default_sampler_params(engine::SamplerKind::kDs4);
  p.temperature = 1.0, p.top_k = 2, p.top_p = 1.0, p.min_p = 0.0;
  // law[prefix] = distribution of the next token after prompt + prefix.
  std::map<std::vector<int32_t>, std::vector<double>> law;
  std::function<void(std::vector<int32_t>, std::unique_ptr<ModelState>, std::vector<float>)> walk =
      [&](std::vector<int32_t> pre, std::unique_ptr<ModelState> st, std::vector<float> lg) {
        std::vector<double> d(static_cast<size_t>(V));
        engine::ds4_distribution(lg, p, d);
        law[pre] = d;
        if (pre.size() == 3) return;
        for (int64_t t = 0; t < V; ++t) {
          if (d[size_t(t)] <= 0) continue;
          auto s2 = st->clone();
          auto next = pre;
          next.push_back(int32_t(t));
          auto l2 = m.decode(*s2, int32_t(t));
          walk(next, std::move(s2), l2);
        }
      };
  {
    auto st = m.new_state();
    auto lg = m.prefill(*st, sc.prompt);
    walk({}, std::move(st), lg);
  }
  std::map<std::vector<int32_t>, double> seen;
  engine::SpecStats total;
  for (int s = 0; s < seeds; ++s) {
    p.seed = uint64_t(5000 + s);
    const SampledRun r = run_sampled(sc, engine::SpecCategory::kExact, depth, p, 4, {});
    ASSERT_EQ(r.tokens.size(), 4u);
    seen[r.tokens] += 1;
    total.add(r.stats);
  }
  double chi = 0;
  int cells = 0;
  for (const auto& [pre, d1] : law) {
    if (pre.size() != 3) continue;
    const double prefix = law.at({})[size_t(pre[0])] * law.at({pre[0]})[size_t(pre[1])] *
                          law.at({pre[0], pre[1]})[size_t(pre[2])];  // P(x1, x2, x3)
    for (int64_t t = 0; t < V; ++t) {
      if (d1[size_t(t)] <= 0) continue;
      std::vector<int32_t> path = pre;
      path.push_back(int32_t(t));
      const double e = seeds * prefix * d1[size_t(t)];
      const double o = seen.count(path) ? seen[path] : 0.0;
      chi += (o - e) * (o - e) / e;
      seen.erase(path);
      cells++;
    }
  }
  EXPECT_TRUE(seen.empty()) << "paths outside the target's support";
  EXPECT_EQ(cells, 16);
  EXPECT_LT(chi, 37.7) << "depth " << depth;
  std::printf("exact depth %d: chi-square %.1f (15 dof), drafted %ld accepted %ld corrections %ld bonus %ld\n", depth,
              chi, long(total.drafted), long(total.accepted), long(total.corrections), long(total.bonus));
  EXPECT_GT(total.corrections, 0);
  if (must_accept) {
    EXPECT_GT(total.accepted, seeds / 4);
    EXPECT_GT(total.corrections, seeds / 10);
  }
  EXPECT_EQ(total.repairs + total.full_replays, 0);
}

}  // namespace ds4::draft_test
