// Model::state_cost (admission control's per-state arithmetic, models/model.h) against the
// bytes real states hold, for every CPU family (draft heads on and off): a state holding p
// tokens never holds more than the bound, and (draft head off) past the sliding windows the
// bound's per-token part is exactly what 64 more tokens add (64 is a whole number of every
// block size of the tiny models: pools of 4, compression ratios of 4 and 16) and the bound is
// met exactly at a block boundary.
#include <gtest/gtest.h>

#include "family_model.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4 {
namespace {

const std::string kData = DS4_TEST_DATA;

struct Case {
  std::string tag, dir, head;  // head: draft head file merged into a temp folder (empty: none)
  std::string extra = "";      // config merged into the temp folder (DSpark's settings)
  // Bytes the bound counts for open compressor windows, empty at a block boundary: DeepSeek's
  // tiny model has two CSA layers (ratio 4: KV lane 2 * 4 * 64 floats, indexer lane 2 * 4 * 32)
  // and one HCA layer (ratio 16: 2 * 16 * 32), 2560 floats.
  double open_windows = 0;
};

class StateCostOf : public ::testing::TestWithParam<Case> {};

// Feeds 160 tokens (8-token prefill slices, then single decode steps past 96) and checks the
// bound at every step; returns the bytes held at 0, 8, 16, ... positions.
std::vector<size_t> grow(Model& m, ModelState& st, const StateCost& cost) {
  std::vector<float> logits;
  std::vector<size_t> held{st.bytes()};
  EXPECT_LE(st.bytes(), cost.at(0));
  for (int i = 0; i < 20; ++i) {
    const int n = i < 12 ? 8 : 1;
    for (int k = 0; k < 8; k += n) {
      std::vector<int32_t> ids(static_cast<size_t>(n));
      for (int j = 0; j < n; ++j) ids[size_t(j)] = 2 + (i * 8 + k + j) * 7 % 60;
      m.forward(st, ids, Logits::kLast, logits);
      EXPECT_LE(st.bytes(), cost.at(st.position())) << "at position " << st.position();
    }
    held.push_back(st.bytes());
  }
  return held;
}

TEST_P(StateCostOf, BoundsTheStateAndCountsItsGrowthExactly) {
  const Case& c = GetParam();
  auto m = test::load_family_model(c.tag, c.dir, c.head, c.extra);
  const StateCost cost = m->state_cost(false);
  EXPECT_GT(cost.per_token, 0.0) << "CPU states grow with the context";
  auto st = m->new_state();
  const std::vector<size_t> held = grow(*m, *st, cost);
  // Positions 32 -> 96 and 96 -> 160 (the second fed token by token): exactly per_token each.
  EXPECT_EQ(double(held[12] - held[4]), cost.per_token * 64);
  EXPECT_EQ(double(held[20] - held[12]), cost.per_token * 64);
  // Past its windows a state holds exactly the bound at a block boundary (less the open
  // compressor windows, which are empty there).
  EXPECT_EQ(double(held[20]) + c.open_windows, cost.fixed + cost.per_token * 160);
  if (!m->draft_head()) return;
  // With the draft head on, its history and the rows queued for it stay within the bound
  // (GLM and Qwen queue the trunk rows until the next draft: an upper bound, not exact).
  const StateCost with_head = m->state_cost(true);
  EXPECT_GE(with_head.fixed, cost.fixed);
  EXPECT_GE(with_head.per_token, cost.per_token);
  auto hs = m->new_state();
  m->draft_head()->enable_draft(*hs);
  grow(*m, *hs, with_head);
}

INSTANTIATE_TEST_SUITE_P(
    Families, StateCostOf,
    ::testing::Values(Case{"glm5", kData + "/glm5/model", ""},
                      Case{"glm5_mtp", kData + "/glm5/model", kData + "/glm5/mtp/mtp.safetensors"},
                      Case{"qwen_next", kData + "/qwen_next/model", ""},
                      Case{"deepseek_v4", kData + "/deepseek_v4/model", "", "", 2560 * 4},
                      Case{"deepseek_v4_mtp", kData + "/deepseek_v4/model", kData + "/deepseek_v4/mtp/mtp.safetensors",
                           "", 2560 * 4},
                      Case{"deepseek_v4_dspark", kData + "/deepseek_v4/model",
                           kData + "/deepseek_v4/dspark/dspark.safetensors",
                           kData + "/deepseek_v4/dspark/dspark_config.json", 2560 * 4}),
    [](const auto& info) { return info.param.tag; });

}  // namespace
}  // namespace ds4
