// On-disk session checkpoints through the engine: a restarted engine continues a chat from
// the checkpoint of the previous turn (cached tokens = the whole history, same answer as
// an engine that never restarted), and a damaged checkpoint only costs a full prefill.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chat_test_util.h"
#include "engine/engine.h"
#include "persist/checkpoint_file.h"
#include "persist/prefix_hash.h"
#include "support/test_codec.h"
#include "support/test_model.h"

using namespace ds4;
using namespace ds4::engine;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct Done {
  std::string content;
  Usage usage;
};

Done run(Engine& e, const std::vector<tok::Message>& msgs) {
  GenRequest r;
  r.conv.messages = msgs;
  r.conv.thinking = tok::Thinking::kOff;
  r.max_tokens = 200;
  auto h = e.submit(std::move(r));
  Done d;
  for (;;) {
    auto ev = h->next(10s);
    if (!ev) throw std::runtime_error("timeout");
    if (ev->kind == GenEvent::Kind::kContent) d.content += ev->text;
    if (ev->kind == GenEvent::Kind::kError) throw std::runtime_error(ev->text);
    if (ev->kind == GenEvent::Kind::kDone) {
      d.usage = ev->usage;
      return d;
    }
  }
}

std::unique_ptr<Engine> engine_on(const std::string& dir) {
  EngineOptions o;
  o.checkpoint_dir = dir;
  return std::make_unique<Engine>(std::make_unique<testmodel::TestModel>("qwen_test", 4096),
                                  std::make_unique<testmodel::TestCodec>(), o);
}

using ds4::test::msg;

using ds4::test::TempDir;

// Two turns on one engine; returns the messages for turn 3 and the turn-2 usage.
std::vector<tok::Message> two_turns(Engine& e, Usage& u2) {
  std::vector<tok::Message> msgs = {msg("user", "one")};
  msgs.push_back(msg("assistant", run(e, msgs).content));
  msgs.push_back(msg("user", "two"));
  auto r2 = run(e, msgs);
  u2 = r2.usage;
  msgs.push_back(msg("assistant", r2.content));
  msgs.push_back(msg("user", "three"));
  return msgs;
}

}  // namespace

TEST(SessionCheckpoints, RestartedEngineContinuesFromDisk) {
  TempDir dir("ds4-ckpt-engine");
  // Reference: an engine that never restarts.
  auto ref_engine = engine_on("");
  Usage ref_u2;
  const auto msgs = two_turns(*ref_engine, ref_u2);
  const auto ref3 = run(*ref_engine, msgs);

  Usage u2;
  {
    auto e = engine_on(dir.path);
    two_turns(*e, u2);
  }  // destroying the engine finishes the queued writes
  ASSERT_FALSE(fs::is_empty(dir.path));
  auto e = engine_on(dir.path);
  const auto r3 = run(*e, msgs);
  EXPECT_EQ(r3.content, ref3.content);
  EXPECT_EQ(r3.content, "Echo: three. Done.");
  EXPECT_EQ(r3.usage.cached_tokens, u2.prompt_tokens + u2.completion_tokens);
  EXPECT_EQ(r3.usage.prompt_tokens, ref3.usage.prompt_tokens);
  const auto m = e->metrics();
  EXPECT_EQ(m.computed_prompt_tokens, m.prompt_tokens - m.cached_tokens);
  EXPECT_EQ(m.checkpoints.restores, 1u);
  EXPECT_EQ(m.checkpoints.rejected, 0u);
  EXPECT_GT(m.checkpoints.bytes_read, 0u);
}

TEST(SessionCheckpoints, CorruptedCheckpointIsRefusedAndRecomputed) {
  TempDir dir("ds4-ckpt-corrupt");
  Usage u2;
  std::vector<tok::Message> msgs;
  {
    auto e = engine_on(dir.path);
    msgs = two_turns(*e, u2);
  }
  // Flip one byte in the middle of every checkpoint file (not the manifest).
  int damaged = 0;
  for (const auto& f : fs::directory_iterator(dir.path)) {
    if (f.path().filename().string().find("manifest") != std::string::npos) continue;
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto size = fs::file_size(f.path());
    io.seekg(std::streamoff(size / 2));
    char c = 0;
    io.read(&c, 1);
    c = char(c ^ 0x5a);
    io.seekp(std::streamoff(size / 2));
    io.write(&c, 1);
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  auto e = engine_on(dir.path);
  const auto r3 = run(*e, msgs);
  EXPECT_EQ(r3.content, "Echo: three. Done.");
  EXPECT_EQ(r3.usage.cached_tokens, 0);
  // Both damaged files (turns 1 and 2) were refused and counted; nothing was restored.
  const auto m = e->metrics();
  EXPECT_EQ(m.checkpoints.rejected, 2u);
  EXPECT_EQ(m.checkpoints.restores, 0u);
  EXPECT_EQ(m.computed_prompt_tokens, m.prompt_tokens);
}

// A checkpoint whose checksums hold but whose state and token key disagree (written by a
// buggy or foreign build): before, its state was continued as if it held the key's tokens,
// at the wrong positions. Now it is refused like a damaged file and the turn recomputed.
TEST(SessionCheckpoints, StateLongerThanItsTokenKeyIsRefused) {
  TempDir dir("ds4-ckpt-mismatch");
  Usage u2;
  std::vector<tok::Message> msgs;
  {
    auto e = engine_on(dir.path);
    msgs = two_turns(*e, u2);
  }
  int crafted = 0;
  for (const auto& f : std::vector<fs::directory_entry>(fs::directory_iterator(dir.path), {})) {
    if (f.path().extension() != ".ckpt") {
      fs::remove(f.path());  // the manifest: rebuilt from the files
      continue;
    }
    Checkpoint c = read_checkpoint(f.path().string(), "");
    fs::remove(f.path());
    c.tokens.pop_back();  // one token fewer than the state holds
    c.alias.clear();
    char name[64];
    std::snprintf(name, sizeof name, "%016llx-%llu.ckpt", (unsigned long long)prefix_hash(c.tokens),
                  (unsigned long long)c.tokens.size());
    write_checkpoint((fs::path(dir.path) / name).string(), c);
    ++crafted;
  }
  ASSERT_EQ(crafted, 2);
  auto e = engine_on(dir.path);
  const auto r3 = run(*e, msgs);
  EXPECT_EQ(r3.content, "Echo: three. Done.");
  EXPECT_EQ(r3.usage.cached_tokens, 0);
  const auto m = e->metrics();
  // The longest one (turn 2's) is refused at install; the turn then prefills everything.
  EXPECT_EQ(m.checkpoints.rejected, 1u);
  EXPECT_EQ(m.computed_prompt_tokens, m.prompt_tokens);
}
