// ds4's MTP head inside the generic greedy speculative loop (engine/speculative.h): output
// equals greedy AR token for token, with the head's own drafts and with drafts forced to the
// AR continuation (all accepted + bonus), depths 1 and 3.
#include <gtest/gtest.h>

#include <filesystem>

#include <unistd.h>

#include "engine/speculative.h"
#include "golden.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4_test {
namespace {

namespace fs = std::filesystem;

struct GenRun {
  std::vector<int32_t> tokens;
  ds4::engine::SpecStats stats;
};

GenRun generate(ds4::Model& m, const std::vector<int32_t>& prompt, int depth, const std::vector<int32_t>* force) {
  GenRun r;
  auto st = m.new_state();
  if (depth > 0) m.draft_head()->enable_draft(*st);
  auto logits = m.prefill(*st, prompt);
  std::function<void(std::vector<int32_t>&)> corrupt;
  if (force)
    corrupt = [&](std::vector<int32_t>& d) {
      const size_t at = size_t(st->position()) - prompt.size() + 1;
      for (size_t k = 0; k < d.size() && at + k < force->size(); ++k) d[k] = (*force)[at + k];
    };
  const int32_t eos[] = {1};
  r.tokens = ds4::engine::generate_greedy(m, st, logits, 24, eos, depth, &r.stats, corrupt);
  return r;
}

TEST(DeepseekMtpSpec, GreedySpeculativeEqualsAr) {
  fs::path dir = fs::temp_directory_path() / ("ds4_spec_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(fs::path(kModelDir) / f, dir / f, fs::copy_options::overwrite_existing);
  fs::copy_file(std::string(DS4_TEST_DATA) + "/deepseek_v4/mtp/mtp.safetensors", dir / "mtp.safetensors",
                fs::copy_options::overwrite_existing);
  auto m = ds4::load_model(dir.string());
  fs::remove_all(dir);
  Golden g;
  const auto prompt = g.i32("p64.tokens");
  const GenRun ar = generate(*m, prompt, 0, nullptr);
  ASSERT_EQ(ar.tokens.size(), 24u);
  for (int depth : {1, 3}) {
    const GenRun own = generate(*m, prompt, depth, nullptr);
    EXPECT_EQ(own.tokens, ar.tokens) << depth;
    EXPECT_GT(own.stats.drafted, 0) << depth;
    const GenRun forced = generate(*m, prompt, depth, &ar.tokens);
    EXPECT_EQ(forced.tokens, ar.tokens) << depth;
    EXPECT_GT(forced.stats.accepted, 0) << depth;
    EXPECT_GT(forced.stats.bonus, 0) << depth;
    EXPECT_EQ(forced.stats.full_replays, 0) << depth;
  }
}

}  // namespace
}  // namespace ds4_test
