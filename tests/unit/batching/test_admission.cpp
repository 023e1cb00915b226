// Admission control and preemption (engine_admission.cpp) on the tiny GLM 5.x model: under a
// state-memory budget that holds one turn's projected state plus a little, concurrent turns
// wait in the queue or are preempted (state dropped, re-fed when admitted again), and every
// turn still emits exactly the token ids it emits alone: greedy, seeded sampling (the
// sampler's RNG carries over the preemption), and speculating. A turn that could never fit is
// refused with a CapacityError and the engine keeps serving; once every turn is done the
// live states hold no bytes and the prefix cache stays within the budget. The same with
// preemption by swap to host (EngineOptions::preempt_swap): a preempted turn's state sections
// wait with it and a fresh state loads them, so nothing is re-fed.
#include <gtest/gtest.h>

#include <thread>

#include "engine_idle.h"
#include "core/capacity_error.h"
#include "core/error.h"
#include "glm_engine_fixture.h"

namespace ds4::engine {
namespace {
using namespace std::chrono_literals;

constexpr int kTurns = 5;
constexpr int64_t kMax = 40;

// One turn's projected state at the largest prompt (20 + 8 * (kTurns - 1) ids) plus a fresh
// state and 24 tokens: a second turn starts beside a young first one, and the two outgrow
// the budget before both are done.
size_t tight_budget(const StateCost& c) {
  return c.at(20 + 8 * (kTurns - 1) + kMax) + c.at(24);
}

class Admission : public GlmEngine {
 protected:
  GenRequest greedy(int i) { return request(i, kMax); }
  GenRequest sampled(int i) {
    GenRequest r = request(i, kMax);
    r.sampler.temperature = 1.0;
    r.sampler.seed = 1000 + uint64_t(i);
    return r;
  }

  // All turns submitted at once on an engine with the tight budget; each must equal `ref`.
  EngineMetrics run_all(int depth, const std::vector<std::vector<int32_t>>& ref,
                        const std::function<GenRequest(int)>& req, bool swap = false) {
    const StateCost cost = engine(depth)->state_cost();
    const size_t budget = tight_budget(cost);
    auto e = engine(depth, true, 0, [&](EngineOptions& o) {
      o.state_memory_bytes = budget;
      o.preempt_swap = swap;
      o.swap_bytes = size_t(64) << 20;
    });
    EXPECT_EQ(e->state_memory_budget(), budget);
    std::vector<Turn> turns;
    for (int i = 0; i < kTurns; ++i) turns.push_back(submit(*e, req(i))), turns.back().log_index = size_t(i);
    int64_t preempted = 0;
    for (auto& t : turns) {
      t.pump();
      preempted += t.done->usage.preemptions;
    }
    for (int i = 0; i < kTurns; ++i) EXPECT_EQ(ids(turns[size_t(i)]), ref[size_t(i)]) << "turn " << i;
    const EngineMetrics m = wait_until_idle(*e);
    EXPECT_EQ(m.live, 0);
    EXPECT_EQ(m.state_bytes, 0u) << "every live state's memory is returned";
    EXPECT_LE(m.cache_bytes, budget) << "the prefix cache stays within the budget";
    EXPECT_EQ(m.state_budget_bytes, budget);
    EXPECT_EQ(int64_t(m.preemptions), preempted) << "the per-turn counts add up to the engine's";
    EXPECT_EQ(m.swap_outs, swap ? m.preemptions : 0u) << "every preemption swaps (the swap budget is ample), or none";
    EXPECT_EQ(m.swapped_bytes, 0u) << "no swapped state is left behind";
    EXPECT_EQ(m.swap_budget_bytes, swap ? size_t(64) << 20 : 0u);
    RecordProperty("preemptions", int(m.preemptions));
    RecordProperty("computed_prompt_tokens", int(m.computed_prompt_tokens));
    return m;
  }
};

TEST_F(Admission, GreedyTurnsUnderATightBudgetEmitTheirAloneTokens) {
  const auto ref = alone(kTurns, kMax);
  const EngineMetrics m = run_all(0, ref, [&](int i) { return greedy(i); });
  EXPECT_GT(m.preemptions, 0u) << "the budget must have forced preemptions";
}

TEST_F(Admission, SeededSamplingCarriesItsRngOverPreemption) {
  const auto ref = alone(kTurns, [&](int i) { return sampled(i); });
  const EngineMetrics m = run_all(0, ref, [&](int i) { return sampled(i); });
  EXPECT_GT(m.preemptions, 0u);
  EXPECT_GT(m.sampled_from_candidates, 0u) << "decode steps drew from candidates, recomputed ones from rows";
}

TEST_F(Admission, SpeculatingTurnsUnderATightBudgetStayExact) {
  // Depth 2 with the GLM head: greedy speculation equals AR alone, preempted or not.
  const auto ref = alone(kTurns, kMax);
  const EngineMetrics m = run_all(2, ref, [&](int i) { return greedy(i); });
  EXPECT_GT(m.preemptions, 0u);
}

// Prompt ids of all turns (20 + 8i each): what the engine computes at most when nothing is re-fed.
constexpr uint64_t kAllPromptIds = kTurns * 20 + 8 * kTurns * (kTurns - 1) / 2;

TEST_F(Admission, SwappedTurnsResumeExactlyWithoutRefeeding) {
  const auto ref = alone(kTurns, kMax);
  const EngineMetrics m = run_all(0, ref, [&](int i) { return greedy(i); }, /*swap=*/true);
  EXPECT_GT(m.swap_outs, 0u) << "the budget must have forced preemptions";
  EXPECT_LE(m.computed_prompt_tokens, kAllPromptIds) << "a swapped-in state re-feeds nothing";
}

TEST_F(Admission, SwappedSampledTurnsKeepTheirRngStream) {
  const auto ref = alone(kTurns, [&](int i) { return sampled(i); });
  const EngineMetrics m = run_all(0, ref, [&](int i) { return sampled(i); }, /*swap=*/true);
  EXPECT_GT(m.swap_outs, 0u);
  EXPECT_LE(m.computed_prompt_tokens, kAllPromptIds);
}

TEST_F(Admission, SwappedSpeculatingTurnsStayExact) {
  // The sections carry the MTP head's history: the resumed turn drafts from where it stopped.
  const auto ref = alone(kTurns, kMax);
  const EngineMetrics m = run_all(2, ref, [&](int i) { return greedy(i); }, /*swap=*/true);
  EXPECT_GT(m.swap_outs, 0u);
  EXPECT_LE(m.computed_prompt_tokens, kAllPromptIds);
}

TEST_F(Admission, SwapBeyondItsBudgetFallsBackToRecompute) {
  const auto ref = alone(kTurns, kMax);
  const size_t budget = tight_budget(engine(0)->state_cost());
  auto e = engine(0, true, 0, [&](EngineOptions& o) {
    o.state_memory_bytes = budget;
    o.preempt_swap = true;
    o.swap_bytes = 1;  // no state's sections fit: every preemption recomputes
  });
  std::vector<Turn> turns;
  for (int i = 0; i < kTurns; ++i) turns.push_back(submit(*e, greedy(i))), turns.back().log_index = size_t(i);
  for (auto& t : turns) t.pump();
  for (int i = 0; i < kTurns; ++i) EXPECT_EQ(ids(turns[size_t(i)]), ref[size_t(i)]) << "turn " << i;
  const EngineMetrics m = wait_until_idle(*e);
  EXPECT_GT(m.preemptions, 0u);
  EXPECT_EQ(m.swap_outs, 0u);
}

// Turns continuing one cached prefix count its blocks once (ModelState::proportional_bytes):
// the prefix's rows live in paged blocks that the cache entry and every turn's clone share.
// A first turn caches a 256-id prompt; four turns then extend it by 8 ids each, all at once,
// under a budget that holds the prefix twice and each turn's own rows: they all start from
// the cached prefix, decode side by side, none is preempted, and each emits exactly its ids
// alone. Counted per holder (the bytes before), that budget could not hold a third such turn
// beside two (the arithmetic is checked below), and the cache entry would be evicted.
TEST_F(Admission, TurnsOnOneCachedPrefixCountItOnce) {
  constexpr int kPrefix = 256, kSuffix = 8, kOn = 4;
  constexpr int64_t kGen = 24;
  auto prompt = [](int i) {  // i < 0: the prefix alone
    std::string p(RecordingCodec::kIdPrompt);
    uint32_t x = 12345u;
    for (int k = 0; k < kPrefix; ++k) x = x * 1664525u + 1013904223u, p += std::to_string(1 + (x >> 9) % 1000) + " ";
    for (int k = 0; i >= 0 && k < kSuffix; ++k) p += std::to_string(1 + (37 * i + 11 * k) % 1000) + " ";
    return p;
  };
  auto req = [&](int i, int64_t max) {
    GenRequest r;
    r.raw_prompt = prompt(i);
    r.max_tokens = max;
    r.sampler.temperature = 0;
    return r;
  };
  const auto ref = alone(kOn, [&](int i) { return req(i, kGen); });
  const StateCost c = engine(0)->state_cost();
  const size_t budget = 2 * c.at(kPrefix + kSuffix + kGen) + (kOn - 1) * c.at(kSuffix + kGen);
  ASSERT_GT(3 * c.at(kPrefix + kSuffix) + c.at(kPrefix + kSuffix + kGen), budget)
      << "per holder, three started turns and a fourth's need would not fit (or the test proves nothing)";
  auto e = engine(0, true, 0, [&](EngineOptions& o) {
    o.state_memory_bytes = budget;
    o.snapshot_prompt = true;  // the prefix's prompt end is what the turns continue
  });
  Turn first = submit(*e, req(-1, 1));
  first.pump();
  std::vector<Turn> turns;
  for (int i = 0; i < kOn; ++i) turns.push_back(submit(*e, req(i, kGen))), turns.back().log_index = size_t(1 + i);
  for (auto& t : turns) t.pump();
  for (int i = 0; i < kOn; ++i) EXPECT_EQ(ids(turns[size_t(i)]), ref[size_t(i)]) << "turn " << i;
  const EngineMetrics m = wait_until_idle(*e);
  EXPECT_EQ(m.preemptions, 0u);
  EXPECT_EQ(m.cache_hits, uint64_t(kOn)) << "every turn continued the cached prefix";
  EXPECT_EQ(m.computed_prompt_tokens, uint64_t(kPrefix + kOn * kSuffix)) << "the prefix was computed once";
  uint64_t wide = 0;  // iterations that decoded more than two turns together
  for (int b = 2; b < 8; ++b) wide += m.decode_steps_by_size[b];
  EXPECT_GT(wide, 0u) << "more than two turns decoded side by side";
  EXPECT_EQ(m.state_bytes, 0u);
}

TEST_F(Admission, ARequestThatCanNeverFitIsRefusedAndServingGoesOn) {
  const auto ref = alone(1, kMax);
  const size_t budget = tight_budget(engine(0)->state_cost());
  auto e = engine(0, true, 0, [&](EngineOptions& o) { o.state_memory_bytes = budget; });
  GenRequest big = request(0, 4000);  // 4020 positions: far beyond the budget
  try {
    e->submit(std::move(big));
    FAIL() << "a request whose state can never fit must be refused";
  } catch (const CapacityError& err) {
    EXPECT_NE(std::string(err.what()).find("state memory budget"), std::string::npos) << err.what();
  }
  Turn t = submit(*e, greedy(0));
  t.log_index = 0;
  t.pump();
  EXPECT_EQ(ids(t), ref[0]);
  EXPECT_EQ(e->metrics().requests_total, 1u) << "the refused request never entered the queue";
}

}  // namespace
}  // namespace ds4::engine
