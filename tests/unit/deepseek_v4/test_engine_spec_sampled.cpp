// The engine's sampled speculative turns on the ds4 sampler (tiny DeepSeek V4 + ds4's MTP
// head, and the DSpark drafter): the turn's category and counters are reported per turn
// (usage), opportunistic gives the speculation-off text for the same seed, exact reports its
// own category with no repair and no full replay, and the DSpark gate is resolved per turn
// (0.8 for an exact turn left unset, 0.6 for the others, explicit values kept).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "draft_head_test_util.h"
#include "engine/engine.h"
#include "engine/tok_codec.h"
#include "golden.h"
#include "models/model.h"

namespace ds4_test {
namespace {
using namespace std::chrono_literals;
using ds4::engine::GenEvent;

struct Answer {
  std::string text;
  GenEvent done;
};

struct Turn {
  int depth = 3;
  std::string sampling = "exact";
  double temperature = 0.9;
  uint64_t seed = 7;
  std::optional<double> gate;
};

Turn turn(int depth, const std::string& sampling, double temperature, uint64_t seed,
          std::optional<double> gate = std::nullopt) {
  Turn t;
  t.depth = depth, t.sampling = sampling, t.temperature = temperature, t.seed = seed, t.gate = gate;
  return t;
}

Answer ask(const std::string& dir, const Turn& t) {
  auto model = ds4::load_model(dir);
  auto codec = ds4::engine::TokCodec::open(dir, model->info().family);
  ds4::engine::EngineOptions o;
  o.spec_depth = t.depth;
  o.spec_sampling = t.sampling;
  o.dspark_confidence = t.gate;
  ds4::engine::Engine e(std::move(model), std::move(codec), o);
  ds4::engine::GenRequest r;
  ds4::tok::Message m;
  m.role = "user";
  m.content = "Tell me a short story about a cat.";
  r.conv.messages = {m};
  r.max_tokens = 40;
  r.sampler.temperature = t.temperature;
  r.sampler.seed = t.seed;
  auto h = e.submit(r);
  Answer a;
  for (;;) {
    auto ev = h->next(120s);
    if (!ev) throw std::runtime_error("timeout");
    if (ev->kind == GenEvent::Kind::kError) throw std::runtime_error(ev->text);
    if (ev->kind == GenEvent::Kind::kDone) {
      a.done = *ev;
      return a;
    }
    a.text += ev->text;
  }
}

class EngineSpecDs4 : public ::testing::Test {
 protected:
  static std::string dir(const std::string& tag, const std::string& head, const std::string& extra = "") {
    const std::string d = ds4::draft_test::trunk_with_head_dir(tag, kModelDir, head, extra);
    std::filesystem::copy_file(std::filesystem::path(kModelDir) / "tokenizer.json",
                               std::filesystem::path(d) / "tokenizer.json",
                               std::filesystem::copy_options::overwrite_existing);
    return d;
  }
};

TEST_F(EngineSpecDs4, MtpSampledTurnsReportCategoryAndCounters) {
  const std::string d = dir("ds4_engine_mtp", std::string(DS4_TEST_DATA) + "/deepseek_v4/mtp/mtp.safetensors");
  for (uint64_t seed : {7u, 12345u}) {
    const Turn off = turn(0, "exact", 0.9, seed);
    const Turn op = turn(3, "opportunistic", 0.9, seed);
    const Answer a = ask(d, off), b = ask(d, op);
    EXPECT_EQ(b.text, a.text) << "seed " << seed;
    EXPECT_EQ(b.done.usage.completion_tokens, a.done.usage.completion_tokens);
    EXPECT_EQ(a.done.usage.spec_mode, "target_only");
    EXPECT_EQ(b.done.usage.spec_mode, "opportunistic");
    EXPECT_GT(b.done.usage.spec_drafted, 0);
    EXPECT_EQ(b.done.usage.spec_repairs, 0);
    EXPECT_EQ(b.done.usage.spec_full_replays, 0);
    EXPECT_EQ(b.done.usage.spec_accepted + b.done.usage.spec_corrections + b.done.usage.spec_bonus > 0, true);
  }
  const Answer x = ask(d, turn(3, "exact", 0.9, 7));
  EXPECT_EQ(x.done.usage.spec_mode, "exact");
  EXPECT_GT(x.done.usage.spec_drafted, 0);
  EXPECT_GT(x.done.usage.spec_corrections, 0);
  EXPECT_EQ(x.done.usage.spec_repairs, 0);
  EXPECT_EQ(x.done.usage.spec_full_replays, 0);
  EXPECT_EQ(ask(d, turn(3, "exact", 0.9, 7)).text, x.text);  // the turn's own stream: reproducible
  EXPECT_EQ(ask(d, turn(3, "exact", 0.0, 7)).done.usage.spec_mode, "greedy");
  EXPECT_EQ(ask(d, turn(3, "target_only", 0.9, 7)).done.usage.spec_mode, "target_only");
  std::filesystem::remove_all(d);
}

TEST_F(EngineSpecDs4, DsparkGateResolvedPerTurn) {
  const std::string dd = std::string(DS4_TEST_DATA) + "/deepseek_v4/dspark";
  const std::string d = dir("ds4_engine_dspark", dd + "/dspark.safetensors", dd + "/dspark_config.json");
  EXPECT_DOUBLE_EQ(ask(d, turn(3, "exact", 0.9, 7)).done.usage.spec_dspark_confidence, 0.8);
  EXPECT_DOUBLE_EQ(ask(d, turn(3, "opportunistic", 0.9, 7)).done.usage.spec_dspark_confidence, 0.6);
  EXPECT_DOUBLE_EQ(ask(d, turn(3, "exact", 0.0, 7)).done.usage.spec_dspark_confidence, 0.6);
  const Turn zero = turn(3, "exact", 0.9, 7, 0.0);
  const Answer z = ask(d, zero);
  EXPECT_DOUBLE_EQ(z.done.usage.spec_dspark_confidence, 0.0);
  EXPECT_EQ(z.done.usage.spec_mode, "exact");
  EXPECT_GT(z.done.usage.spec_drafted, 0);  // gate 0 keeps every draft
  EXPECT_EQ(z.done.usage.spec_full_replays, 0);
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace ds4_test
