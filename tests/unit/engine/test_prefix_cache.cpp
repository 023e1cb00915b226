// Prefix cache branch points: snapshots at prefill chunk boundaries (a prompt that diverges
// inside a long earlier prompt resumes from the last boundary before the divergence), and
// turn ends by max_tokens or a stop string (the next turn reuses exactly the tokens that
// still match). Each reuse is checked against an uncached run: same text / same greedy ids.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "models/model.h"

using namespace ds4;
using namespace ds4::engine;

namespace {
size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  return k;
}

EngineOptions snapshot_options(int64_t every, size_t cache_bytes = size_t(64) << 20) {
  EngineOptions o;
  o.snapshot_every = every;
  o.cache_bytes = cache_bytes;
  return o;
}
}  // namespace

TEST(PrefixCache, ChunkSnapshotsLetADivergingPromptResume) {
  // Test model: prefill chunks of 64 tokens; a snapshot at every chunk end.
  auto e = make_engine({}, "qwen_test", snapshot_options(64));
  const std::string shared(300, 'p');
  auto a = chat({user(shared + " then the first ending")});
  auto b = chat({user(shared + " and another ending")});
  a.max_tokens = b.max_tokens = 1000;
  auto ra = collect(*e->submit(a));
  EXPECT_EQ(ra.done.usage.cached_tokens, 0);
  EXPECT_EQ(ra.content, "Echo: " + shared + " then the first ending. Done.");
  // The prompt of `a` spans 5 chunk ends (64..320) before its last, partial chunk.
  const auto pa = e->codec().render(a.conv), pb = e->codec().render(b.conv);
  ASSERT_GT(pa.size(), 320u);
  EXPECT_EQ(e->metrics().cache_entries, 5u + 1u + 1u);  // chunk ends, prompt end, turn end
  auto rb = collect(*e->submit(b));
  const size_t lcp = common_prefix(pa, pb);
  ASSERT_GT(lcp, 300u);
  EXPECT_EQ(rb.done.usage.cached_tokens, int64_t(lcp / 64 * 64));  // 256 of the shared 307
  EXPECT_EQ(rb.done.usage.prompt_tokens, int64_t(pb.size()));
  // The scripted answer echoes every byte of the user turn as the state holds it.
  auto fresh = make_engine({}, "qwen_test", snapshot_options(-1, 0));
  auto rf = collect(*fresh->submit(b));
  EXPECT_EQ(rf.done.usage.cached_tokens, 0);
  EXPECT_EQ(rb.content, rf.content);
  EXPECT_EQ(rb.content, "Echo: " + shared + " and another ending. Done.");
}

TEST(PrefixCache, ChunkSnapshotsOffAndAuto) {
  auto off = make_engine({}, "qwen_test", snapshot_options(-1));
  EXPECT_EQ(off->snapshot_every(), 0);
  collect(*off->submit(chat({user(std::string(300, 'q'))})));
  EXPECT_EQ(off->metrics().cache_entries, 2u);  // prompt end + turn end only
  auto b = collect(*off->submit(chat({user(std::string(300, 'q') + "x")})));
  EXPECT_EQ(b.done.usage.cached_tokens, 0);
  // auto: 4096 tokens, whole chunks; an explicit value rounds up to whole chunks.
  EXPECT_EQ(make_engine({}, "qwen_test", snapshot_options(0))->snapshot_every(), 4096);
  EXPECT_EQ(make_engine({}, "qwen_test", snapshot_options(100))->snapshot_every(), 128);
}

TEST(PrefixCache, ChunkSnapshotsStayInsideTheByteBudget) {
  // Test states cost 4096 bytes + 4 per token: a 20 KiB budget holds only a few.
  auto e = make_engine({}, "qwen_test", snapshot_options(64, 20 << 10));
  collect(*e->submit(chat({user(std::string(600, 'z'))})));
  const auto m = e->metrics();
  EXPECT_LE(m.cache_bytes, size_t(20) << 10);
  EXPECT_GT(m.cache_evictions, 0u);
}

// ---- the real tiny Qwen3.8 Flash Next model (recurrent GDN state + indexed attention) ----
namespace {
// Completion-mode codec over the tiny model's 1024 ids: bytes are ids 0..255, every id
// prints as "<id>" so the greedy token ids can be compared as text (and sent back).
class IdCodec : public Codec {
 public:
  std::string family() const override { return "qwen_next"; }
  std::vector<int32_t> render(const tok::Conversation&) const override { throw Error("IdCodec: no chat template"); }
  // Plain bytes, or "<n>" for id n (what stream() prints), so generated ids can be sent back.
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> out;
    for (size_t i = 0; i < text.size(); ++i) {
      const size_t close = text[i] == '<' ? text.find('>', i) : std::string_view::npos;
      if (close != std::string_view::npos && close > i + 1) {
        out.push_back(int32_t(std::stoi(std::string(text.substr(i + 1, close - i - 1)))));
        i = close;
      } else {
        out.push_back(int32_t((unsigned char)text[i]));
      }
    }
    return out;
  }
  std::unique_ptr<TextStream> stream() const override {
    struct S : TextStream {
      std::string push(int32_t id) override { return "<" + std::to_string(id) + ">"; }
      std::string finish() override { return ""; }
    };
    return std::make_unique<S>();
  }
  std::unique_ptr<tok::OutputParser> parser(bool) const override { return nullptr; }
  bool starts_in_reasoning(const tok::Conversation&) const override { return false; }
  std::string token_bytes(int32_t id) const override { return id < 256 ? std::string(1, char(id)) : ""; }
  bool is_stop_token(int32_t id) const override { return id == 1000; }
};

std::unique_ptr<Engine> tiny_qwen_engine(EngineOptions o) {
  LoadOptions lo;
  lo.threads = 2;
  o.prefill_chunk = 16;
  return std::make_unique<Engine>(load_model(std::string(DS4_TEST_DATA) + "/qwen_next/model", lo),
                                  std::make_unique<IdCodec>(), o);
}

GenRequest completion(std::string text) {
  GenRequest r;
  r.raw_prompt = std::move(text);
  r.parse_output = false;
  r.sampler.temperature = 0;  // greedy
  r.max_tokens = 12;
  return r;
}
}  // namespace

TEST(PrefixCache, TinyQwenResumesAtChunkBoundaryWithIdenticalGreedyTokens) {
  auto cached = tiny_qwen_engine(snapshot_options(16));
  std::string shared;
  for (int i = 0; shared.size() < 150; ++i) shared += "word" + std::to_string(i * 7 % 13) + " ";
  const auto a = completion(shared + "alpha beta gamma delta");
  const auto b = completion(shared + "omega psi chi");
  const auto ra = collect(*cached->submit(a));
  EXPECT_EQ(ra.done.usage.cached_tokens, 0);
  const auto rb = collect(*cached->submit(b));
  // Divergence after shared.size() (>= 150) tokens: the last boundary before it is 144.
  EXPECT_EQ(rb.done.usage.cached_tokens, int64_t(shared.size() / 16 * 16));
  EXPECT_EQ(rb.done.usage.cached_tokens, 144);
  // Uncached reference: same chunk boundaries from position 0, so the same arithmetic.
  auto fresh = tiny_qwen_engine(snapshot_options(-1, 0));
  const auto rf = collect(*fresh->submit(b));
  EXPECT_EQ(rf.done.usage.cached_tokens, 0);
  EXPECT_EQ(rb.content, rf.content);
  EXPECT_EQ(rb.done.usage.completion_tokens, rf.done.usage.completion_tokens);
  EXPECT_FALSE(rb.content.empty());
  // And the first prompt, run again, resumes from its own prompt-end snapshot.
  const auto ra2 = collect(*cached->submit(a));
  EXPECT_EQ(ra2.done.usage.cached_tokens, ra2.done.usage.prompt_tokens);
  EXPECT_EQ(ra2.content, ra.content);
}

TEST(PrefixCache, TinyQwenStopStringTurnResumesBeforeTheStopString) {
  EngineOptions o = snapshot_options(-1);  // no chunk snapshots: only turn / prompt ends
  auto cached = tiny_qwen_engine(o);
  const std::string prompt = "the quick brown fox jumps over the lazy dog and then";
  auto free_run = completion(prompt);
  free_run.max_tokens = 10;
  const auto r0 = collect(*cached->submit(free_run));
  const auto ids = cached->codec().encode(r0.content);
  ASSERT_GE(ids.size(), 8u);
  // Stop on the 6th generated token (its first occurrence): 5 tokens come before it.
  const size_t k = size_t(std::find(ids.begin(), ids.end(), ids[5]) - ids.begin());
  auto stopped = completion(prompt);
  stopped.stop = {"<" + std::to_string(ids[5]) + ">"};
  const auto r1 = collect(*cached->submit(stopped));
  ASSERT_EQ(r1.done.finish, Finish::kStopString);
  std::string before;
  for (size_t i = 0; i < k; ++i) before += "<" + std::to_string(ids[i]) + ">";
  EXPECT_EQ(r1.content, before);
  // The next prompt continues the text the client saw (without the stop string).
  const auto next = completion(prompt + before + " next");
  const auto r2 = collect(*cached->submit(next));
  EXPECT_EQ(r2.done.usage.cached_tokens, int64_t(prompt.size() + k));
  auto fresh = tiny_qwen_engine(snapshot_options(-1, 0));
  const auto rf = collect(*fresh->submit(next));
  EXPECT_EQ(rf.done.usage.cached_tokens, 0);
  EXPECT_EQ(r2.content, rf.content);
  EXPECT_EQ(r2.done.usage.prompt_tokens, rf.done.usage.prompt_tokens);
}

// ---- turn ends by max_tokens and by a stop string (scripted test model) ----
namespace {
// Strips assistant content like the Qwen/GLM templates (`content|trim`): the re-rendered
// history then differs from the generated tokens in edge whitespace only.
class TrimCodec : public testmodel::TestCodec {
 public:
  std::vector<int32_t> render(const tok::Conversation& conv) const override {
    tok::Conversation c = conv;
    for (auto& m : c.messages)
      if (m.role == "assistant") {
        const size_t b = m.content.find_first_not_of(" \n"), e = m.content.find_last_not_of(" \n");
        m.content = b == std::string::npos ? "" : m.content.substr(b, e - b + 1);
      }
    return TestCodec::render(c);
  }
};

struct Turns {
  std::vector<int32_t> p1, p2, p3;  // rendered prompts
  Result r1, r2, r3;
};

// Turn 1 ends on max_tokens ("1 2 3 4 5 "), turn 2 on the stop string "Done" ("Echo: two. ").
Turns length_then_stop_string(Engine& e) {
  Turns t;
  std::vector<tok::Message> msgs = {user("count")};
  auto q1 = chat(msgs);
  q1.max_tokens = 10;
  t.p1 = e.codec().render(q1.conv);
  t.r1 = collect(*e.submit(q1));
  msgs.push_back(assistant(t.r1.content));
  msgs.push_back(user("two"));
  auto q2 = chat(msgs);
  q2.stop = {"Done"};
  t.p2 = e.codec().render(q2.conv);
  t.r2 = collect(*e.submit(q2));
  msgs.push_back(assistant(t.r2.content));
  msgs.push_back(user("three"));
  auto q3 = chat(msgs);
  t.p3 = e.codec().render(q3.conv);
  t.r3 = collect(*e.submit(q3));
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
}  // namespace

TEST(PrefixCache, LengthAndStopStringTurnsReuseExactlyTheMatchingTokens) {
  auto e = make_engine();
  const Turns t = length_then_stop_string(*e);
  ASSERT_EQ(t.r1.content, "1 2 3 4 5 ");
  ASSERT_EQ(t.r1.done.finish, Finish::kLength);
  ASSERT_EQ(t.r2.content, "Echo: two. ");
  ASSERT_EQ(t.r2.done.finish, Finish::kStopString);
  EXPECT_EQ(t.r3.content, "Echo: three. Done.");
  // Turn 2 holds turn 1's prompt and its 10 generated tokens, a real prefix of prompt 2.
  const auto held2 = concat(t.p1, e->codec().encode("1 2 3 4 5 "));
  EXPECT_EQ(t.r2.done.usage.cached_tokens, int64_t(held2.size()));
  EXPECT_TRUE(std::equal(held2.begin(), held2.end(), t.p2.begin()));
  // Turn 3 resumes before the stop string: prompt 2 plus "Echo: two. " (11 tokens), which is
  // what prompt 3 repeats; the state that also held "Done" is not reused.
  const auto held3 = concat(t.p2, e->codec().encode("Echo: two. "));
  EXPECT_EQ(t.r3.done.usage.cached_tokens, int64_t(held3.size()));
  EXPECT_TRUE(std::equal(held3.begin(), held3.end(), t.p3.begin()));
  EXPECT_NE(t.p3[held3.size()], int32_t('D'));
  const auto m = e->metrics();
  EXPECT_EQ(m.computed_prompt_tokens, m.prompt_tokens - m.cached_tokens);
}

TEST(PrefixCache, TrimmingTemplateStillReusesLengthAndStopStringTurns) {
  Engine e(std::make_unique<testmodel::TestModel>(), std::make_unique<TrimCodec>(), EngineOptions{});
  const Turns t = length_then_stop_string(e);
  ASSERT_EQ(t.r1.done.finish, Finish::kLength);
  ASSERT_EQ(t.r2.done.finish, Finish::kStopString);
  EXPECT_EQ(t.r3.content, "Echo: three. Done.");
  // Prompt 2 re-renders "1 2 3 4 5" without the trailing space the state holds: the turn's
  // alias (canonical render through <|im_end|>) names it, and <|im_end|> is fed on reuse.
  EXPECT_EQ(t.r2.done.usage.cached_tokens, t.r1.done.usage.prompt_tokens + 10);
  EXPECT_EQ(t.r2.done.usage.prompt_tokens, int64_t(t.p2.size()) + 1);  // the kept space
  EXPECT_EQ(t.r3.done.usage.cached_tokens, t.r2.done.usage.prompt_tokens + 11);
  // An answer the client changed beyond whitespace never takes the aliased state, even when
  // the alias's text is a prefix of it ("1 2 3 4 5" of "1 2 3 4 5x": the alias ends with the
  // turn's <|im_end|>): only the prompt-end snapshot of turn 1 fits.
  auto q = chat({user("count"), assistant("1 2 3 4 5x"), user("x")});
  const auto r = collect(*e.submit(q));
  EXPECT_EQ(r.done.usage.cached_tokens, t.r1.done.usage.prompt_tokens);
  EXPECT_EQ(r.content, "Echo: x. Done.");
}
