// The engine with continuous batching on the tiny GLM 5.x model (the family whose CPU
// decode_batch reads each weight once): every turn that runs concurrently with others,
// joining while others decode and beside one cancelled mid-turn, emits exactly the token ids
// it emits alone (greedy), with speculation off, with speculating turns mixed with plain
// ones, and with every turn speculating (their verifies batched; greedy and seeded sampling;
// also on the default Qwen model and on DeepSeek V4 with DSpark). On the scripted test model: answers exact under load and every state returned.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "engine_idle.h"
#include "glm_engine_fixture.h"
#include "support/test_codec.h"
#include "support/test_model.h"

namespace ds4::engine {
namespace {
using namespace std::chrono_literals;
namespace fs = std::filesystem;
const std::string kData = DS4_TEST_DATA;

// Once the last turn is gone (live 0, published with it), the engine holds no batched logits
// rows (Engine::batch_rows_ is released when the run ends).
void expect_batch_rows_released(Engine& e) {
  const EngineMetrics m = wait_until_idle(e);
  ASSERT_EQ(m.live, 0);
  EXPECT_EQ(m.batch_rows_bytes, 0u);
}

// Six turns: three start together, three join once the first has emitted tokens, turn 1 is
// cancelled mid-turn. Each finished turn equals its run alone; the cancelled one is a prefix.
void run_join_and_cancel(GlmEngine& f, Engine& e, const std::vector<std::vector<int32_t>>& ref, int64_t max_tokens,
                         std::function<GenRequest(int)> req, std::function<Turn(Engine&, GenRequest)> submit,
                         std::function<std::vector<int32_t>(const Turn&)> ids) {
  std::vector<Turn> turns;
  for (int i = 0; i < 3; ++i) turns.push_back(submit(e, req(i))), turns.back().log_index = size_t(i);
  turns[0].pump(3);  // decoding is under way
  for (int i = 3; i < 6; ++i) turns.push_back(submit(e, req(i))), turns.back().log_index = size_t(i);
  turns[1].pump(4);
  turns[1].h->cancel();
  for (auto& t : turns) t.pump();
  for (int i = 0; i < 6; ++i) {
    const auto got = ids(turns[size_t(i)]);
    if (i == 1 && turns[1].done->finish == Finish::kCancelled) {
      ASSERT_LE(got.size(), ref[1].size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), ref[1].begin())) << "the cancelled turn's ids are a prefix";
      continue;
    }
    EXPECT_EQ(got, ref[size_t(i)]) << "turn " << i;
  }
  (void)f;
  (void)max_tokens;
}

TEST_F(GlmEngine, ConcurrentTurnsEmitTheirAloneTokens) {
  const int64_t kMax = 40;
  const auto ref = alone(6, kMax);
  for (bool batching : {true, false}) {
    auto e = engine(0, batching);
    run_join_and_cancel(
        *this, *e, ref, kMax, [&](int i) { return request(i, kMax); },
        [&](Engine& en, GenRequest r) { return submit(en, std::move(r)); }, [&](const Turn& t) { return ids(t); });
    const EngineMetrics m = e->metrics();
    if (batching) {
      EXPECT_GT(m.batched_calls, 0u) << "the concurrent decode steps must have run batched";
      EXPECT_GE(m.batched_rows, 2 * m.batched_calls);
      // Sessions that joined together had their prompt slices fed in one pass (prefill_batch).
      EXPECT_GT(m.batched_prefill_calls, 0u);
      EXPECT_GE(m.batched_prefill_sequences, 2 * m.batched_prefill_calls);
      EXPECT_EQ(m.step_tokens, 16);  // auto: one prefill chunk
      expect_batch_rows_released(*e);
    } else {
      EXPECT_EQ(m.batched_calls, 0u);
      EXPECT_EQ(m.batched_prefill_calls, 0u);
      EXPECT_EQ(m.step_tokens, 0);
    }
    uint64_t multi = 0;
    for (size_t b = 1; b < 8; ++b) multi += m.decode_steps_by_size[b];
    EXPECT_GT(multi, 0u) << "iterations with more than one decode step";
    e->shutdown();
    EXPECT_EQ(e->metrics().live, 0);
  }
}

TEST_F(GlmEngine, TightBudgetStillExact) {
  // A budget of 4 tokens per iteration: prompts are fed in slices of 1..4 between decode steps.
  const int64_t kMax = 24;
  const auto ref = alone(6, kMax);
  auto e = engine(0, true, 4);
  run_join_and_cancel(
      *this, *e, ref, kMax, [&](int i) { return request(i, kMax); },
      [&](Engine& en, GenRequest r) { return submit(en, std::move(r)); }, [&](const Turn& t) { return ids(t); });
  EXPECT_GT(e->metrics().batched_calls, 0u);
  EXPECT_GT(e->metrics().batched_prefill_calls, 0u) << "slices of 1..4 tokens of several prompts in one pass";
}

TEST_F(GlmEngine, SpeculatingTurnsBesidePlainOnes) {
  // Depth 2 (the GLM head): even turns speculate, odd ones ask for speculation off and decode
  // batched together; greedy speculation is exact, so every turn equals AR alone.
  const int64_t kMax = 40;
  const auto ref = alone(6, kMax);
  auto e = engine(2);
  std::vector<Turn> turns;
  run_join_and_cancel(
      *this, *e, ref, kMax, [&](int i) { return request(i, kMax, i % 2 == 0 ? std::nullopt : std::optional(false)); },
      [&](Engine& en, GenRequest r) {
        turns.push_back(submit(en, std::move(r)));
        return turns.back();
      },
      [&](const Turn& t) { return ids(t); });
  const EngineMetrics m = e->metrics();
  EXPECT_GT(m.batched_calls, 0u) << "the plain turns must have decoded batched";
  // Turn 0 speculated (its usage says so); the plain ones did not.
  auto e2 = engine(2);
  Turn t0 = submit(*e2, request(0, kMax));
  Turn t3 = submit(*e2, request(3, kMax, false));
  t0.pump();
  t3.pump();
  EXPECT_GT(t0.done->usage.spec_drafted, 0);
  EXPECT_EQ(t3.done->usage.spec_drafted, 0);
  EXPECT_EQ((*log_)[0], ref[0]);
  EXPECT_EQ((*log_)[1], ref[3]);
}

// Every turn speculates (depth: the model's head): each iteration's cycles draft per turn
// and verify in one Model::verify_batch, then accept and commit per turn. Greedy turns
// equal AR alone; seeded sampled turns (category exact, the engine's default) equal their
// own speculating run alone on a fresh engine: the same draws in the same order. Turns
// join mid-way and turn 1 is cancelled mid-batch (run_join_and_cancel).
// full_windows: the head always drafts `depth` tokens (MTP); DSpark's gate cuts windows.
void speculating_turns_verify_together(GlmEngine& f, int depth, bool full_windows = true) {
  const int64_t kMax = 40;
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "sampled" : "greedy");
    auto req = [&](int i) {
      GenRequest r = f.request(i, kMax);
      if (sampled) r.sampler.temperature = 0.9, r.sampler.seed = 1000 + uint64_t(i);
      return r;
    };
    std::vector<std::vector<int32_t>> ref;
    if (sampled) {
      for (int i = 0; i < 6; ++i) {
        auto e = f.engine(depth);
        Turn t = f.submit(*e, req(i));
        t.pump();
        EXPECT_GT(t.done->usage.spec_drafted, 0) << "turn " << i << " speculated alone";
        ref.push_back(f.ids(t));
      }
    } else {
      ref = f.alone(6, kMax);
    }
    auto e = f.engine(depth);
    run_join_and_cancel(
        f, *e, ref, kMax, req, [&](Engine& en, GenRequest r) { return f.submit(en, std::move(r)); },
        [&](const Turn& t) { return f.ids(t); });
    const EngineMetrics m = e->metrics();
    EXPECT_GT(m.batched_verify_calls, 0u);
    // Greedy windows are always next + depth drafts: more rows than that per call means some
    // call carried several turns' windows.
    if (!sampled && full_windows) EXPECT_GT(m.batched_verify_rows, uint64_t(depth + 1) * m.batched_verify_calls);
    EXPECT_EQ(m.batched_calls, 0u) << "every turn speculated: no plain batched step";
    expect_batch_rows_released(*e);
    e->shutdown();
  }
}

TEST_F(GlmEngine, SpeculatingTurnsVerifyTogether) { speculating_turns_verify_together(*this, 2); }

// The same on the default Qwen Next model (its MTP head, depth 3, MTPLX's sampler).
class QwenDefaultEngine : public GlmEngine {
 protected:
  void SetUp() override { dir_ = std::string(DS4_ROOT) + "/models/default"; }
  void TearDown() override {}  // the checked-in model: nothing to remove
};

TEST_F(QwenDefaultEngine, SpeculatingTurnsVerifyTogether) { speculating_turns_verify_together(*this, 3); }

// And on the tiny DeepSeek V4 with its DSpark head: ragged windows (the confidence gate cuts
// each turn's drafts), the ds4 sampler's stream for the sampled turns.
class DeepseekDsparkEngine : public GlmEngine {
 protected:
  void SetUp() override {
    dir_ = draft_test::trunk_with_head_dir("ds4-batching-dsv4", kData + "/deepseek_v4/model",
                                           kData + "/deepseek_v4/dspark/dspark.safetensors",
                                           kData + "/deepseek_v4/dspark/dspark_config.json");
    fs::copy_file(fs::path(kData) / "deepseek_v4/model/tokenizer.json", fs::path(dir_) / "tokenizer.json",
                  fs::copy_options::overwrite_existing);
  }
};

TEST_F(DeepseekDsparkEngine, SpeculatingTurnsVerifyTogether) { speculating_turns_verify_together(*this, 3, false); }

// The scripted model with a batched decode_batch (the default loop, declared batched): the
// engine's batching path on answers known in advance, and every state handed back.
class BatchedTestModel : public testmodel::TestModel {
 public:
  explicit BatchedTestModel(std::chrono::microseconds delay) : TestModel("qwen_test", 4096, delay) {
    info_ = TestModel::info();
    info_.batched_decode = true;
  }
  const ModelInfo& info() const override { return info_; }

 private:
  ModelInfo info_;
};

TEST(EngineBatching, ScriptedAnswersUnderLoadAndStatesReturned) {
  const int64_t before = testmodel::TestModel::live_states();
  {
    EngineOptions o;
    o.prefill_chunk = 8;
    Engine e(std::make_unique<BatchedTestModel>(100us), std::make_unique<testmodel::TestCodec>(), o);
    std::vector<std::shared_ptr<RequestHandle>> hs;
    auto chat = [](const std::string& text) {
      GenRequest r;
      tok::Message m;
      m.role = "user";
      m.content = text;
      r.conv.messages = {m};
      r.conv.thinking = tok::Thinking::kOff;
      r.max_tokens = 300;
      return r;
    };
    for (int i = 0; i < 8; ++i) hs.push_back(e.submit(chat("hello number " + std::to_string(i))));
    auto counting = e.submit(chat("count please"));
    std::string counted;
    for (;;) {  // cancel the long turn once it is decoding beside the others
      auto ev = counting->next(60s);
      ASSERT_TRUE(ev);
      if (ev->kind == GenEvent::Kind::kContent) counted += ev->text;
      if (counted.size() > 10) break;
    }
    counting->cancel();
    for (int i = 0; i < 8; ++i) {
      std::string content;
      std::optional<GenEvent> done;
      while (!done) {
        auto ev = hs[size_t(i)]->next(60s);
        ASSERT_TRUE(ev);
        if (ev->kind == GenEvent::Kind::kContent) content += ev->text;
        if (ev->kind == GenEvent::Kind::kDone) done = *ev;
      }
      EXPECT_EQ(content, "Echo: hello number " + std::to_string(i) + ". Done.");
      EXPECT_EQ(done->finish, Finish::kStop);
    }
    for (;;) {
      auto ev = counting->next(60s);
      ASSERT_TRUE(ev);
      if (ev->kind == GenEvent::Kind::kDone) {
        EXPECT_EQ(ev->finish, Finish::kCancelled);
        break;
      }
    }
    const EngineMetrics m = wait_until_idle(e);
    EXPECT_GT(m.batched_calls, 0u);
    EXPECT_EQ(m.requests_cancelled, 1u);
    ASSERT_EQ(m.live, 0);
    // Only the prefix cache holds states once every turn is done (cancelled: published none).
    EXPECT_EQ(testmodel::TestModel::live_states() - before, int64_t(m.cache_entries));
  }
  EXPECT_EQ(testmodel::TestModel::live_states(), before);
}

}  // namespace
}  // namespace ds4::engine
