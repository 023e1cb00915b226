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

#include "../common/draft_head_test_util.h"
#include "engine/engine.h"
#include "engine/tok_codec.h"
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

// The ids each turn pushed into its detokenizer, in order: one vector per turn (stream).
using IdLog = std::shared_ptr<std::vector<std::vector<int32_t>>>;

class RecordingStream : public TextStream {
 public:
  RecordingStream(std::unique_ptr<TextStream> s, std::vector<int32_t>* ids) : s_(std::move(s)), ids_(ids) {}
  std::string push(int32_t id) override {
    ids_->push_back(id);
    return s_->push(id);
  }
  std::string finish() override { return s_->finish(); }

 private:
  std::unique_ptr<TextStream> s_;
  std::vector<int32_t>* ids_;
};

// The production codec, with every turn's emitted ids recorded into `log`.
class RecordingCodec : public Codec {
 public:
  RecordingCodec(std::unique_ptr<TokCodec> c, IdLog log) : c_(std::move(c)), log_(std::move(log)) {}
  std::string family() const override { return c_->family(); }
  std::vector<int32_t> render(const tok::Conversation& conv) const override { return c_->render(conv); }
  tok::Continuation continuation(const std::vector<int32_t>& h, const tok::Conversation& conv) const override {
    return c_->continuation(h, conv);
  }
  // A raw prompt spelled "#ids 1 2 3" stands for exactly those ids (tests drive token ids).
  std::vector<int32_t> encode(std::string_view text) const override {
    if (!text.starts_with(kIdPrompt)) return c_->encode(text);
    std::vector<int32_t> ids;
    std::istringstream in{std::string(text.substr(kIdPrompt.size()))};
    for (int32_t id; in >> id;) ids.push_back(id);
    return ids;
  }
  static constexpr std::string_view kIdPrompt = "#ids ";
  std::unique_ptr<TextStream> stream() const override {
    log_->emplace_back();
    return std::make_unique<RecordingStream>(c_->stream(), &log_->back());
  }
  std::unique_ptr<tok::OutputParser> parser(bool thinking) const override { return c_->parser(thinking); }
  bool starts_in_reasoning(const tok::Conversation& conv) const override { return c_->starts_in_reasoning(conv); }
  std::string token_bytes(int32_t id) const override { return c_->token_bytes(id); }
  bool is_stop_token(int32_t id) const override { return c_->is_stop_token(id); }

 private:
  std::unique_ptr<TokCodec> c_;
  IdLog log_;  // streams are made one turn at a time (tests run turns one by one)
};

tok::Message msg(std::string role, std::string s) {
  tok::Message m;
  m.role = std::move(role);
  m.content = std::move(s);
  return m;
}

struct Answer {
  std::vector<int32_t> ids;  // emitted token ids, the final stop token included
  std::string text;          // all streamed text (content, reasoning, tool calls)
  GenEvent done;
};

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name) {
    path = (fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))).string();
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

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

  std::unique_ptr<Engine> engine(int depth, int64_t context = 0, const std::string& ckpt = "") {
    LoadOptions lo;
    lo.threads = 2;
    auto model = load_model(dir_, lo);
    EXPECT_NE(model->draft_head(), nullptr) << "the folder must load the draft head";
    auto codec = std::make_unique<RecordingCodec>(TokCodec::open(dir_, model->info().family), log_);
    EngineOptions o;
    o.spec_depth = depth;
    o.context_size = context;
    o.checkpoint_dir = ckpt;
    return std::make_unique<Engine>(std::move(model), std::move(codec), o);
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
    r.conv.messages = msgs;
    r.raw_prompt = std::move(raw_prompt);
    r.conv.thinking = tok::Thinking::kOff;
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
  IdLog log_ = std::make_shared<std::vector<std::vector<int32_t>>>();
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
  auto e = engine(3);
  const Answer cut = run(*e, kStory, 40, 3);
  EXPECT_EQ(cut.done.finish, Finish::kCancelled);
  ASSERT_FALSE(cut.ids.empty());
  ASSERT_LT(cut.ids.size(), full.ids.size());
  EXPECT_EQ(std::vector<int32_t>(full.ids.begin(), full.ids.begin() + int64_t(cut.ids.size())), cut.ids)
      << "the partial turn is a prefix of the answer";
  EXPECT_GT(cut.done.usage.spec_drafted, 0) << "the turn speculated before the cancel";
  EXPECT_EQ(cut.done.usage.spec_full_replays, 0);
  // Nothing of the cancelled turn entered the prefix cache: only the prompt snapshot, as AR
  // (the bytes differ: the speculative state also holds the draft head's).
  EXPECT_EQ(e->metrics().cache_entries, ref_cut->metrics().cache_entries);
  EXPECT_EQ(e->metrics().requests_cancelled, 1u);
  // The same question again gives the uncancelled answer (a half-finished speculative state
  // would change it), resuming from the same cached prefix as AR after its cancel.
  const Answer again = run(*e, kStory, 40), ar_again = run(*ref_cut, kStory, 40);
  EXPECT_EQ(again.ids, full.ids);
  EXPECT_EQ(ar_again.ids, full.ids);
  EXPECT_EQ(again.done.finish, full.done.finish);
  EXPECT_GT(again.done.usage.cached_tokens, 0);
  EXPECT_EQ(again.done.usage.cached_tokens, ar_again.done.usage.cached_tokens);
}

TEST_P(SpecEdgesFamily, ContextEndInsideDraftStopsLikeTargetOnly) {
  // Sweep the context size so its end falls at every offset of a 3-draft cycle (and one
  // more), starting a few tokens after the prompt.
  auto probe = engine(0);
  const Answer free = run(*probe, kStory, 1);
  const int64_t prompt = free.done.usage.prompt_tokens;
  ASSERT_GT(prompt, 0);
  int ended = 0;
  for (int64_t ctx = prompt + 6; ctx < prompt + 11; ++ctx) {
    auto a = engine(0, ctx), s = engine(3, ctx);
    const Answer ar = run(*a, kStory, 200), sp = run(*s, kStory, 200);
    EXPECT_EQ(sp.ids, ar.ids) << "context " << ctx;
    EXPECT_EQ(sp.done.finish, ar.done.finish) << "context " << ctx;
    EXPECT_EQ(sp.done.usage.completion_tokens, ar.done.usage.completion_tokens) << "context " << ctx;
    EXPECT_EQ(sp.done.usage.completion_tokens, int64_t(sp.ids.size())) << "context " << ctx;
    EXPECT_EQ(sp.done.usage.spec_full_replays, 0);
    if (ar.done.finish == Finish::kContext) {
      ++ended;
      EXPECT_EQ(ar.done.usage.prompt_tokens + ar.done.usage.completion_tokens, ctx) << "context " << ctx;
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
}

INSTANTIATE_TEST_SUITE_P(Families, SpecEdgesFamily, ::testing::ValuesIn(kFamilies),
                         [](const ::testing::TestParamInfo<Family>& i) { return i.param.tag; });

}  // namespace
}  // namespace ds4::engine
