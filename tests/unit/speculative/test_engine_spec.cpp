// The engine with speculation on (greedy turns) gives the same text, finish and token
// count as with speculation off, and reports the speculative counters in usage.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/tok_codec.h"
#include "models/model.h"

namespace ds4::engine {
namespace {
using namespace std::chrono_literals;

struct Answer {
  std::string text;
  GenEvent done;
};

Answer ask(int depth, const std::string& question, int64_t max_tokens, std::vector<std::string> stop = {},
           double temperature = 0, const std::string& sampling = "exact", uint64_t seed = 12345) {
  const std::string path = std::string(DS4_ROOT) + "/models/default";
  auto model = load_model(path);
  auto codec = TokCodec::open(path, model->info().family);
  EngineOptions o;
  o.spec_depth = depth;
  o.spec_sampling = sampling;
  Engine e(std::move(model), std::move(codec), o);
  GenRequest r;
  tok::Message m;
  m.role = "user";
  m.content = question;
  r.conv.messages = {m};
  r.conv.thinking = tok::Thinking::kOff;
  r.max_tokens = max_tokens;
  r.sampler.temperature = temperature;
  r.sampler.seed = seed;
  r.stop = std::move(stop);
  auto h = e.submit(r);
  Answer a;
  for (;;) {
    auto ev = h->next(60s);
    if (!ev) throw std::runtime_error("timeout");
    if (ev->kind == GenEvent::Kind::kError) throw std::runtime_error(ev->text);
    if (ev->kind == GenEvent::Kind::kDone) { a.done = *ev; return a; }
    a.text += ev->text;
  }
}

TEST(EngineSpec, GreedySameAsTargetOnly) {
  for (int64_t max_tokens : {7, 200}) {
    const auto ar = ask(0, "Tell me a short story about a cat who learns to fly.", max_tokens);
    const auto sp = ask(3, "Tell me a short story about a cat who learns to fly.", max_tokens);
    EXPECT_EQ(sp.text, ar.text) << max_tokens;
    EXPECT_EQ(sp.done.finish, ar.done.finish);
    EXPECT_EQ(sp.done.usage.completion_tokens, ar.done.usage.completion_tokens);
    EXPECT_EQ(ar.done.usage.spec_mode, "target_only");
    EXPECT_EQ(ar.done.usage.spec_drafted, 0);
    EXPECT_EQ(sp.done.usage.spec_mode, "greedy");
    EXPECT_GT(sp.done.usage.spec_drafted, 0);
    EXPECT_GT(sp.done.usage.spec_accepted, 0);
    EXPECT_EQ(sp.done.usage.spec_full_replays, 0);
  }
}

TEST(EngineSpec, StopStringSameAsTargetOnly) {
  const auto full = ask(0, "Explain how photosynthesis works in simple terms.", 200);
  ASSERT_GT(full.text.size(), 20u);
  const std::string stop = full.text.substr(12, 3);
  const auto ar = ask(0, "Explain how photosynthesis works in simple terms.", 200, {stop});
  const auto sp = ask(3, "Explain how photosynthesis works in simple terms.", 200, {stop});
  EXPECT_EQ(sp.text, ar.text);
  EXPECT_EQ(sp.done.finish, Finish::kStopString);
  EXPECT_EQ(sp.done.usage.completion_tokens, ar.done.usage.completion_tokens);
}

TEST(EngineSpec, SampledTurnsUseExactByDefault) {
  // A sampled turn on the Qwen (MTPLX) sampler speculates in category exact and reports it.
  const auto sp = ask(3, "Tell me a short story about a cat who learns to fly.", 120, {}, 0.8);
  EXPECT_EQ(sp.done.usage.spec_mode, "exact");
  EXPECT_GT(sp.done.usage.spec_drafted, 0);
  EXPECT_GT(sp.done.usage.spec_accepted, 0);
  EXPECT_EQ(sp.done.usage.spec_full_replays, 0);
  EXPECT_GT(sp.done.usage.completion_tokens, 0);
  // Same seed, same answer: the walk's draws come from the turn's own generator.
  const auto again = ask(3, "Tell me a short story about a cat who learns to fly.", 120, {}, 0.8);
  EXPECT_EQ(again.text, sp.text);
  // target_only turns it off for sampled turns.
  const auto off = ask(3, "Tell me a short story about a cat who learns to fly.", 40, {}, 0.8, "target_only");
  EXPECT_EQ(off.done.usage.spec_mode, "target_only");
  EXPECT_EQ(off.done.usage.spec_drafted, 0);
}

TEST(EngineSpec, OpportunisticEqualsSampledTargetOnly) {
  // Opportunistic samples every verify row in AR's draw order, so with the same seed the
  // engine's text equals the speculation-off text: this pins the plumbing of the cycle's
  // next token (emitted by the next step, never re-sampled) and the shared generator.
  for (uint64_t seed : {7u, 12345u}) {
    const auto ar = ask(0, "Write a Python function that checks if a number is prime.", 100, {}, 0.9, "exact", seed);
    const auto op =
        ask(3, "Write a Python function that checks if a number is prime.", 100, {}, 0.9, "opportunistic", seed);
    EXPECT_EQ(op.text, ar.text) << "seed " << seed;
    EXPECT_EQ(op.done.finish, ar.done.finish);
    EXPECT_EQ(op.done.usage.completion_tokens, ar.done.usage.completion_tokens);
    EXPECT_EQ(op.done.usage.spec_mode, "opportunistic");
    EXPECT_GT(op.done.usage.spec_accepted, 0);
  }
}

}  // namespace
}  // namespace ds4::engine
