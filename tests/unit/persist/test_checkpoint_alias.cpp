// The turn alias as a second key: a state saved with the generated tokens is found by a prompt
// that starts with the turn's canonical re-render instead (engine turn_alias), also after
// the manifest was lost and rebuilt from the files' headers.
#include <gtest/gtest.h>

#include <filesystem>

#include "persist/checkpoint_store.h"
#include "temp_dir.h"

namespace ds4 {
namespace {

const std::string kModel = "qwen_next:tiny";

// Generated turn: 1 2 3 [40 41] 9 (9 = stop); re-rendered the client's way: 1 2 3 [42] 9.
Checkpoint turn() {
  Checkpoint c;
  c.fingerprint = kModel;
  c.tokens = {1, 2, 3, 40, 41, 9};
  c.alias = {1, 2, 3, 42, 9};
  c.sections.push_back({"state", std::vector<uint8_t>(64, 7)});
  return c;
}

TEST(CheckpointAlias, PromptStartingWithTheAliasRestoresTheState) {
  TempDir dir;
  { CheckpointStore({dir.path(), 1 << 20}).save_async(turn()); }
  CheckpointStore store({dir.path(), 1 << 20});
  const std::vector<int32_t> prompt = {1, 2, 3, 42, 9, 10, 11};
  ASSERT_TRUE(store.has_candidate(kModel, prompt));
  auto got = store.restore_longest(kModel, prompt);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens, turn().tokens);  // what the state holds
  EXPECT_EQ(got->alias, turn().alias);
  EXPECT_EQ(got->find("state")->bytes, turn().sections[0].bytes);
  // Neither key is a prefix: nothing to restore, no file read.
  EXPECT_FALSE(store.has_candidate(kModel, std::vector<int32_t>{1, 2, 3, 43, 9}));
  EXPECT_FALSE(store.restore_longest(kModel, std::vector<int32_t>{1, 2, 3, 43, 9}).has_value());
  EXPECT_EQ(store.stats().restores, 1u);
  EXPECT_EQ(store.stats().rejected, 0u);
}

TEST(CheckpointAlias, RebuiltManifestKeepsTheAlias) {
  TempDir dir;
  { CheckpointStore({dir.path(), 1 << 20}).save_async(turn()); }
  std::filesystem::remove(dir.file("manifest.json"));
  CheckpointStore store({dir.path(), 1 << 20});
  ASSERT_EQ(store.entries().size(), 1u);
  EXPECT_EQ(store.entries()[0].alias_count, 5u);
  EXPECT_TRUE(store.restore_longest(kModel, std::vector<int32_t>{1, 2, 3, 42, 9}).has_value());
  // The generated tokens still work as the first key.
  EXPECT_TRUE(store.restore_longest(kModel, std::vector<int32_t>{1, 2, 3, 40, 41, 9, 5}).has_value());
}

TEST(CheckpointAlias, DamagedFileFoundAtRebuildIsCountedRejected) {
  TempDir dir;
  { CheckpointStore({dir.path(), 1 << 20}).save_async(turn()); }
  std::filesystem::remove(dir.file("manifest.json"));
  std::string file;
  for (const auto& f : std::filesystem::directory_iterator(dir.path())) file = f.path().string();
  std::filesystem::resize_file(file, 20);  // cut inside the header
  CheckpointStore store({dir.path(), 1 << 20});
  EXPECT_TRUE(store.entries().empty());
  EXPECT_EQ(store.stats().rejected, 1u);
  auto problems = store.take_problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("truncated"), std::string::npos) << problems[0];
  EXPECT_FALSE(std::filesystem::exists(file));
}

}  // namespace
}  // namespace ds4
