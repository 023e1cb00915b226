#pragma once
// Scaffolding shared by the draft-head tests of every family (tests/unit/deepseek_v4:
// test_mtp, test_dspark, test_mtp_spec; tests/unit/glm5: test_glm5_mtp, test_glm5_spec).
// A draft head ships as its own file next to the trunk, so each test assembles a temporary
// model directory, reads golden tensors by name, prefills head-enabled states and runs the
// generic greedy speculative loop against AR. One copy keeps the families' tests alike.
// The gtest-free part (directory, greedy run) is draft_head_run.h, shared with tests/cuda.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "draft_head_run.h"
#include "engine/speculative.h"
#include "formats/safetensors.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::draft_test {

// The trunk with its head loaded from such a directory (removed again once loaded).
inline std::unique_ptr<Model> load_with_head(const std::string& tag, const std::string& trunk_dir,
                                             const std::string& head_file, const std::string& extra_config = "") {
  const std::string dir = trunk_with_head_dir(tag, trunk_dir, head_file, extra_config);
  LoadOptions o;
  o.threads = 2;
  auto m = load_model(dir, o);
  std::filesystem::remove_all(dir);
  return m;
}

// A suite-wide model (trunk + head, loaded once: loading dominates under ASan) and its golden
// reference file. CRTP: every fixture gets its own statics.
template <class Fixture>
class DraftHeadSuite : public ::testing::Test {
 protected:
  // Call from the fixture's SetUpTestSuite; `dir` is removed by TearDownTestSuite.
  static void open(const std::string& dir, const std::string& golden) {
    LoadOptions o;
    o.threads = 2;
    dir_ = dir;
    model_ = load_model(dir_, o).release();
    ref_ = new SafetensorsFile(read_safetensors(MappedFile::open(golden)));
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    delete ref_;
    ref_ = nullptr;
    std::filesystem::remove_all(dir_);
  }
  template <class T>
  static std::vector<T> ref(const std::string& name) {
    for (const auto& t : ref_->tensors)
      if (t.name == name) return {static_cast<const T*>(t.data), static_cast<const T*>(t.data) + t.numel()};
    throw std::runtime_error("missing " + name);
  }
  // `toks` consumed in chunks of `chunk` (0: one shot) by a head-enabled state.
  static std::unique_ptr<ModelState> prefilled(const std::vector<int32_t>& toks, size_t chunk = 0,
                                               Logits mode = Logits::kNone) {
    auto st = model_->new_state();
    model_->draft_head()->enable_draft(*st);
    std::vector<float> lg;
    if (!chunk) chunk = toks.size();
    for (size_t i = 0; i < toks.size(); i += chunk)
      model_->forward(*st, std::span<const int32_t>(toks.data() + i, std::min(chunk, toks.size() - i)), mode, lg);
    return st;
  }
  static inline std::string dir_;
  static inline Model* model_ = nullptr;
  static inline SafetensorsFile* ref_ = nullptr;
};

// At each depth the speculative output equals AR token for token, with the head's own drafts
// (for a random head mostly rejected: kept prefixes committed from the captured verify, never
// a repair) and with drafts forced to the AR continuation (all accepted + bonus, never a full
// replay).
inline void expect_speculative_equals_ar(Model& m, const std::vector<int32_t>& prompt, int32_t eos,
                                         std::initializer_list<int> depths) {
  const SpecRun ar = generate(m, prompt, 0, nullptr, eos);
  ASSERT_EQ(ar.tokens.size(), 24u);
  for (int depth : depths) {
    const SpecRun own = generate(m, prompt, depth, nullptr, eos);
    EXPECT_EQ(own.tokens, ar.tokens) << depth;
    EXPECT_GT(own.stats.drafted, 0) << depth;
    EXPECT_GT(own.stats.prefix_commits, 0) << depth;
    EXPECT_EQ(own.stats.repairs + own.stats.full_replays, 0) << depth;
    const SpecRun forced = generate(m, prompt, depth, &ar.tokens, eos);
    EXPECT_EQ(forced.tokens, ar.tokens) << depth;
    EXPECT_GT(forced.stats.accepted, 0) << depth;
    EXPECT_GT(forced.stats.bonus, 0) << depth;
    EXPECT_EQ(forced.stats.repairs + forced.stats.full_replays, 0) << depth;
  }
}

}  // namespace ds4::draft_test
