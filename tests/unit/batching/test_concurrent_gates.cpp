// Concurrent speculating turns on one model with different DSpark confidence gates (SPEC §2:
// exact turns 0.8, others 0.6, or the request's value): each SpecDecoder passes its own gate
// with every draft (DraftHead::draft_gated; the shared model holds none). Two turns whose
// cycles interleave (as the engine's batched iteration runs them) draft exactly as many tokens
// as each alone.
#include <gtest/gtest.h>

#include "batch_cases.h"
#include "engine/speculative.h"

namespace ds4 {
namespace {

using namespace batch_test;

struct TurnRun {
  std::vector<int32_t> tokens;
  int64_t drafted = 0;
};

engine::SpecConfig gated(double confidence) {
  engine::SpecConfig c;
  c.depth = 5;
  c.dspark_confidence = confidence;
  return c;
}

TEST(ConcurrentGates, EachTurnDraftsUnderItsOwnGate) {
  auto m = load(Case{"dspark_gates", kData + "/deepseek_v4/model", kData + "/deepseek_v4/dspark/dspark.safetensors",
                     true, kData + "/deepseek_v4/dspark/dspark_config.json"});
  ASSERT_NE(m->draft_head(), nullptr);
  const int64_t V = m->info().vocab_size;
  const double gates[2] = {0.0, 0.9};
  const auto never = [](int32_t) { return false; };
  constexpr int kCycles = 8;
  auto start = [&](int i, std::unique_ptr<ModelState>& st) {
    st = m->new_state();
    m->draft_head()->enable_draft(*st);
    return argmax(m->prefill(*st, prompt(V, i, 20 + 9 * i)));
  };
  // Alone: each turn's cycles on their own.
  TurnRun alone[2];
  for (int i = 0; i < 2; ++i) {
    std::unique_ptr<ModelState> st;
    int32_t next = start(i, st);
    engine::SpecDecoder spec(*m, gated(gates[i]), engine::SpecDraws{});
    engine::SpecCycle c;
    for (int k = 0; k < kCycles; ++k) {
      spec.cycle(st, next, 1 << 20, never, c);
      alone[i].tokens.insert(alone[i].tokens.end(), c.accepted.begin(), c.accepted.end());
      alone[i].tokens.push_back(next = c.bonus);
    }
    alone[i].drafted = spec.stats().drafted;
  }
  ASSERT_GT(alone[0].drafted, alone[1].drafted) << "the gates must make a difference on this model";
  // Interleaved: both decoders made first, cycles alternating (each draft call carries its own gate).
  std::unique_ptr<ModelState> st[2];
  int32_t next[2];
  std::vector<std::unique_ptr<engine::SpecDecoder>> spec;
  for (int i = 0; i < 2; ++i) {
    next[i] = start(i, st[i]);
    spec.push_back(std::make_unique<engine::SpecDecoder>(*m, gated(gates[i]), engine::SpecDraws{}));
  }
  TurnRun both[2];
  engine::SpecCycle c;
  for (int k = 0; k < kCycles; ++k)
    for (int i = 0; i < 2; ++i) {
      spec[size_t(i)]->cycle(st[i], next[i], 1 << 20, never, c);
      both[i].tokens.insert(both[i].tokens.end(), c.accepted.begin(), c.accepted.end());
      both[i].tokens.push_back(next[i] = c.bonus);
    }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(spec[size_t(i)]->stats().drafted, alone[i].drafted) << "turn " << i << " (gate " << gates[i] << ")";
    EXPECT_EQ(both[i].tokens, alone[i].tokens) << "turn " << i;
  }
}

}  // namespace
}  // namespace ds4
