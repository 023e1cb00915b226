// Speculative decoding at the edges of a turn through the engine, for the families whose
// draft head ships apart from the trunk (test_spec_edges.cpp covers Qwen on models/default):
// GLM 5.x + MTP, DeepSeek V4 + MTP, DeepSeek V4 + DSpark, all on the tiny random-weight test
// models with their tiny tokenizers. The text of a random model is noise, so every check is
// on the exact token ids the engine emitted (recorded at the detokenizer) against a run
// with speculation off.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "draft_head_test_util.h"
#include "chat_test_util.h"
#include "recording_codec.h"
#include "engine/engine.h"
#include "engine/tok_codec.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::engine {
namespace {
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kData = DS4_TEST_DATA;

struct Family {
  std::string tag, trunk, head, extra_config;
};

const Family kFamilies[] = {
    {"glm_mtp", kData + "/glm5/model", kData + "/glm5/mtp/mtp.safetensors", ""},
    {"dsv4_mtp", kData + "/deepseek_v4/model", kData + "/deepseek_v4/mtp/mtp.safetensors", ""},
    {"dsv4_dspark", kData + "/deepseek_v4/model", kData + "/deepseek_v4/dspark/dspark.safetensors",
     kData + "/deepseek_v4/dspark/dspark_config.json"},
};

// A draft head that proposes the known AR continuation: with `full` = prompt + AR answer,
// the drafts after the state's position p (whose next token is full[p]) are full[p+1..].
// Every draft is then accepted, so cycles emit depth + 1 tokens and a turn's end (cancel,
// context) falls inside them, which a random head (drafts almost always rejected) never
// reaches. The real head still runs (and keeps its state); only its proposal is replaced.
class OracleHead : public DraftHead {
 public:
  OracleHead(DraftHead& h, std::vector<int32_t> full) : h_(h), full_(std::move(full)) {}
  void enable_draft(ModelState& st) const override { h_.enable_draft(st); }
  void draft(ModelState& st, int32_t next, int depth, std::vector<int32_t>& drafts) override {
    draft_gated(st, next, depth, 0.0, drafts);
  }
  void draft_gated(ModelState& st, int32_t next, int depth, double gate, std::vector<int32_t>& drafts) override {
    h_.draft_gated(st, next, depth, gate, drafts);
    const size_t p = size_t(st.position());
    if (p >= full_.size() || full_[p] != next) return;  // off the AR path: the head's own
    for (size_t k = 0; k < drafts.size() && p + 1 + k < full_.size(); ++k) drafts[k] = full_[p + 1 + k];
  }
  bool draft_picked(ModelState& st, int32_t next, int depth, const Pick& pick, std::vector<int32_t>& d) override {
    return h_.draft_picked(st, next, depth, pick, d);
  }
  bool verify_capture(ModelState& trial, std::span<const int32_t> t, std::vector<float>& lg) override {
    return h_.verify_capture(trial, t, lg);
  }
  void commit_prefix(ModelState& trial, int64_t keep) override { h_.commit_prefix(trial, keep); }

 private:
  DraftHead& h_;
  std::vector<int32_t> full_;
};

class OracleModel : public Model {
 public:
  OracleModel(std::unique_ptr<Model> m, std::vector<int32_t> full)
      : m_(std::move(m)), head_(*m_->draft_head(), std::move(full)) {}
  const ModelInfo& info() const override { return m_->info(); }
  std::unique_ptr<ModelState> new_state() const override { return m_->new_state(); }
  void forward(ModelState& st, std::span<const int32_t> t, Logits mode, std::vector<float>& lg) override {
    m_->forward(st, t, mode, lg);
  }
  DraftHead* draft_head() override { return &head_; }

 private:
  std::unique_ptr<Model> m_;
  OracleHead head_;
};

using ds4::test::msg;

struct Answer {
  std::vector<int32_t> ids;  // emitted token ids, the final stop token included
  std::string text;          // all streamed text (content, reasoning, tool calls)
  GenEvent done;
};

using ds4::test::TempDir;

class SpecEdgesFamily : public ::testing::TestWithParam<Family> {
 protected:
  // Trunk + head + tokenizer in one folder (removed at the end of the test).
  void SetUp() override {
    const Family& f = GetParam();
    dir_ = draft_test::trunk_with_head_dir("ds4-specedge-" + f.tag, f.trunk, f.head, f.extra_config);
    fs::copy_file(fs::path(f.trunk) / "tokenizer.json", fs::path(dir_) / "tokenizer.json",
                  fs::copy_options::overwrite_existing);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `oracle` (prompt + AR answer, non-empty): drafts forced to it (OracleHead).
  std::unique_ptr<Engine> engine(int depth, int64_t context = 0, const std::string& ckpt = "",
                                 std::vector<int32_t> oracle = {}) {
    LoadOptions lo;
    lo.threads = 2;
    std::unique_ptr<Model> model = load_model(dir_, lo);
    if (!model->draft_head()) throw std::runtime_error("the folder must load the draft head");
    auto codec = std::make_unique<RecordingCodec>(TokCodec::open(dir_, model->info().family), log_);
    if (!oracle.empty()) model = std::make_unique<OracleModel>(std::move(model), std::move(oracle));
    EngineOptions o;
    o.spec_depth = depth;
    o.context_size = context;
    o.checkpoint_dir = ckpt;
    return std::make_unique<Engine>(std::move(model), std::move(codec), o);
  }

  static tok::Conversation conv(const std::vector<tok::Message>& msgs) {
    tok::Conversation c;
    c.messages = msgs;
    c.thinking = tok::Thinking::kOff;
    return c;
  }
  // The rendered prompt of `msgs` followed by `answer`: an OracleHead's sequence.
  static std::vector<int32_t> prompt_plus(Engine& e, const std::vector<tok::Message>& msgs,
                                          const std::vector<int32_t>& answer) {
    std::vector<int32_t> full = e.codec().render(conv(msgs));
    full.insert(full.end(), answer.begin(), answer.end());
    return full;
  }

  // Completion-mode greedy turn on the prompt `ids`.
  Answer run_ids(Engine& e, const std::vector<int32_t>& ids, int64_t max_tokens) {
    std::string p(RecordingCodec::kIdPrompt);
    for (int32_t id : ids) p += std::to_string(id) + " ";
    return run(e, {}, max_tokens, 0, p);
  }

  // Greedy turn; cancel_after > 0: cancel once that many text events arrived.
  Answer run(Engine& e, const std::vector<tok::Message>& msgs, int64_t max_tokens, int cancel_after = 0,
             std::optional<std::string> raw_prompt = std::nullopt) {
    GenRequest r;
    r.conv = conv(msgs);
    r.raw_prompt = std::move(raw_prompt);
    r.max_tokens = max_tokens;
    r.sampler.temperature = 0;
    const size_t turn = log_->size();
    auto h = e.submit(r);
    Answer a;
    int events = 0;
    for (;;) {
      auto ev = h->next(60s);
      if (!ev) throw std::runtime_error("timeout");
      if (ev->kind == GenEvent::Kind::kError) throw std::runtime_error(ev->text);
      if (ev->kind == GenEvent::Kind::kDone) {
        a.done = *ev;
        break;
      }
      if (ev->kind == GenEvent::Kind::kContent || ev->kind == GenEvent::Kind::kReasoning ||
          ev->kind == GenEvent::Kind::kToolCall) {
        a.text += ev->text + ev->call.name;
        if (cancel_after > 0 && ++events == cancel_after) h->cancel();
      }
    }
    if (log_->size() != turn + 1) throw std::runtime_error("expected one stream per turn");
    a.ids = log_->back();
    return a;
  }

  std::string dir_;
  IdLog log_ = std::make_shared<IdLog::element_type>();
};

const std::vector<tok::Message> kStory = {msg("user", "Tell me a short story about a cat who learns to fly.")};

TEST_P(SpecEdgesFamily, CancelMidTurnKeepsPrefixAndPublishesNothing) {
  auto ref = engine(0);
  const Answer full = run(*ref, kStory, 40);
  ASSERT_EQ(full.done.finish, Finish::kLength) << "the reference must run to max_tokens";
  ASSERT_EQ(full.ids.size(), 40u);
  // An AR engine cancelled at the same point is the reference for what the cache holds.
  auto ref_cut = engine(0);
  EXPECT_EQ(run(*ref_cut, kStory, 40, 3).done.finish, Finish::kCancelled);
  const size_t ar_entries = ref_cut->metrics().cache_entries;
  const Answer ar_again = run(*ref_cut, kStory, 40);
  EXPECT_EQ(ar_again.ids, full.ids);
  // The head's own drafts (mostly rejected), then drafts forced to the answer (every cycle
  // emits 4 tokens, the cancel lands inside a cycle's burst of events).
  for (bool forced : {false, true}) {
    SCOPED_TRACE(forced ? "forced drafts" : "own drafts");
    auto e = engine(3, 0, "", forced ? prompt_plus(*ref, kStory, full.ids) : std::vector<int32_t>{});
    const Answer cut = run(*e, kStory, 40, 3);
    EXPECT_EQ(cut.done.finish, Finish::kCancelled);
    ASSERT_GE(cut.ids.size(), 3u);
    ASSERT_LT(cut.ids.size(), full.ids.size());
    EXPECT_EQ(std::vector<int32_t>(full.ids.begin(), full.ids.begin() + int64_t(cut.ids.size())), cut.ids)
        << "the partial turn is a prefix of the answer";
    EXPECT_GT(cut.done.usage.spec_drafted, 0) << "the turn speculated before the cancel";
    if (forced) {
      EXPECT_GT(cut.done.usage.spec_accepted, 0);
    }
    EXPECT_EQ(cut.done.usage.spec_full_replays, 0);
    // Nothing of the cancelled turn entered the prefix cache: only the prompt snapshot, as
    // AR (the bytes differ: the speculative state also holds the draft head's).
    EXPECT_EQ(e->metrics().cache_entries, ar_entries);
    EXPECT_EQ(e->metrics().cache_entries, 1u) << "the prompt snapshot (snapshot_prompt) only";
    EXPECT_EQ(e->metrics().requests_cancelled, 1u);
    // The same question again gives the uncancelled answer (a half-finished speculative
    // state would change it), resuming from the same cached prefix as AR after its cancel.
    const Answer again = run(*e, kStory, 40);
    EXPECT_EQ(again.ids, full.ids);
    EXPECT_EQ(again.done.finish, full.done.finish);
    EXPECT_GT(again.done.usage.cached_tokens, 0);
    EXPECT_EQ(again.done.usage.cached_tokens, ar_again.done.usage.cached_tokens);
  }
}

TEST_P(SpecEdgesFamily, ContextEndInsideDraftStopsLikeTargetOnly) {
  // Sweep the context size so its end falls at every offset of a 3-draft cycle (and one
  // more), far enough after the prompt that cycles run before the engine's end-of-context
  // room (depth + 3) turns them off; with the head's own drafts and with drafts forced
  // to the AR answer (all accepted: the end falls inside the cycles).
  auto probe = engine(0);
  const int64_t prompt = int64_t(probe->codec().render(conv(kStory)).size());
  ASSERT_GT(prompt, 0);
  int ended = 0;
  for (int64_t ctx = prompt + 12; ctx < prompt + 17; ++ctx) {
    auto a = engine(0, ctx);
    const Answer ar = run(*a, kStory, 200);
    EXPECT_EQ(ar.done.usage.prompt_tokens, prompt);
    if (ar.done.finish == Finish::kContext) {
      ++ended;
      EXPECT_EQ(ar.done.usage.prompt_tokens + ar.done.usage.completion_tokens, ctx) << "context " << ctx;
    }
    for (bool forced : {false, true}) {
      auto s = engine(3, ctx, "", forced ? prompt_plus(*a, kStory, ar.ids) : std::vector<int32_t>{});
      const Answer sp = run(*s, kStory, 200);
      SCOPED_TRACE(std::string(forced ? "forced" : "own") + " drafts, context " + std::to_string(ctx));
      EXPECT_EQ(sp.ids, ar.ids);
      EXPECT_EQ(sp.done.finish, ar.done.finish);
      EXPECT_EQ(sp.done.usage.completion_tokens, ar.done.usage.completion_tokens);
      EXPECT_EQ(sp.done.usage.completion_tokens, int64_t(sp.ids.size()));
      EXPECT_GT(sp.done.usage.spec_drafted, 0);
      if (forced) {
        EXPECT_GT(sp.done.usage.spec_accepted, 0);
      }
      EXPECT_EQ(sp.done.usage.spec_full_replays, 0);
    }
  }
  EXPECT_EQ(ended, 5) << "the sweep must actually hit the context end";
}

TEST_P(SpecEdgesFamily, ChatTurnsSameAsTargetOnly) {
  // Three chat turns (the later prompts resume from the prefix cache) with speculation on
  // emit the same ids as with it off.
  auto chat = [&](Engine& e) {
    std::vector<std::vector<int32_t>> ids;
    std::vector<tok::Message> msgs = {msg("user", "Hello!")};
    for (const char* q : {"What is a dictionary in Python?", "Write a Python function that squares a number."}) {
      const Answer a = run(e, msgs, 24);
      ids.push_back(a.ids);
      msgs.push_back(msg("assistant", a.text));
      msgs.push_back(msg("user", q));
    }
    const Answer last = run(e, msgs, 24);
    ids.push_back(last.ids);
    EXPECT_GT(last.done.usage.cached_tokens, 0);
    return ids;
  };
  auto sp = engine(3), ar = engine(0);
  const auto s = chat(*sp), a = chat(*ar);
  EXPECT_EQ(s, a);
  EXPECT_EQ(s.size(), 3u);
}

TEST_P(SpecEdgesFamily, SaveRestoreMidConversationContinuesLikeNeverLeaving) {
  // The tiny tokenizers re-render a random model's answer as other tokens than it emitted,
  // so a chat's next prompt never extends the stored state; the conversation is driven by
  // token ids instead (completion mode, IdCodec prompts): turn 2's prompt is turn 1's prompt
  // + its answer + more, exactly the tokens the checkpoint of turn 1 holds.
  TempDir dir("ds4-specedge-ckpt-" + GetParam().tag);
  const std::vector<int32_t> p1 = {11, 200, 31, 417, 5, 90, 613, 77, 250, 18, 999, 42};
  const std::vector<int32_t> q2 = {64, 128, 300, 7, 512, 33};
  auto stay = engine(3);
  const Answer a1 = run_ids(*stay, p1, 24);
  ASSERT_EQ(a1.ids.size(), 24u);
  ASSERT_EQ(a1.done.finish, Finish::kLength);
  std::vector<int32_t> p2 = p1;
  p2.insert(p2.end(), a1.ids.begin(), a1.ids.end());
  p2.insert(p2.end(), q2.begin(), q2.end());
  const Answer ref2 = run_ids(*stay, p2, 24);
  EXPECT_EQ(ref2.done.usage.cached_tokens, int64_t(p1.size() + a1.ids.size())) << "resumed in memory";
  auto plain = engine(0);
  EXPECT_EQ(run_ids(*plain, p2, 24).ids, ref2.ids) << "speculation changed a greedy answer";

  {
    auto e = engine(3, 0, dir.path);
    EXPECT_EQ(run_ids(*e, p1, 24).ids, a1.ids);
  }  // destroying the engine finishes the checkpoint writes
  ASSERT_TRUE(fs::exists(dir.path));
  auto e = engine(3, 0, dir.path);
  const Answer r2 = run_ids(*e, p2, 24);
  EXPECT_EQ(r2.ids, ref2.ids);
  EXPECT_EQ(r2.done.finish, ref2.done.finish);
  EXPECT_EQ(e->metrics().checkpoints.restores, 1u);
  EXPECT_EQ(r2.done.usage.cached_tokens, int64_t(p1.size() + a1.ids.size())) << "restored, no full prefill";
  // The draft head's state came back too: the same drafts as the engine that never left.
  EXPECT_EQ(r2.done.usage.spec_mode, "greedy");
  EXPECT_GT(r2.done.usage.spec_drafted, 0);
  EXPECT_EQ(r2.done.usage.spec_drafted, ref2.done.usage.spec_drafted);
  EXPECT_EQ(r2.done.usage.spec_accepted, ref2.done.usage.spec_accepted);
  EXPECT_EQ(r2.done.usage.spec_full_replays, 0);
  // Restored again with drafts forced to the answer: accepted cycles (captured-prefix
  // commits) run on the restored state and still give the same ids.
  std::vector<int32_t> oracle = p2;
  oracle.insert(oracle.end(), ref2.ids.begin(), ref2.ids.end());
  auto f = engine(3, 0, dir.path, oracle);
  const Answer forced = run_ids(*f, p2, 24);
  EXPECT_EQ(forced.ids, ref2.ids);
  EXPECT_EQ(f->metrics().checkpoints.restores, 1u);
  EXPECT_EQ(forced.done.usage.cached_tokens, int64_t(p1.size() + a1.ids.size()));
  EXPECT_GT(forced.done.usage.spec_accepted, 0);
  EXPECT_EQ(forced.done.usage.spec_full_replays, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, SpecEdgesFamily, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& i) { return i.param.tag; });

}  // namespace
}  // namespace ds4::engine
