// StepScheduler: decode steps first, prefill slices share what the budget leaves, round-robin.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "engine/step_scheduler.h"

namespace ds4::engine {
namespace {

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t(0)); }

TEST(StepScheduler, NoBudgetGivesEveryPrefillAWholeChunk) {
  StepScheduler s(0, 512);
  EXPECT_EQ(s.grant(16, std::vector<int64_t>{10000, 100, 512}), (std::vector<int64_t>{512, 100, 512}));
}

TEST(StepScheduler, DecodeTokensComeOffTheBudget) {
  StepScheduler s(256, 2048);
  // 100 decode tokens leave 156 for the one long prompt.
  EXPECT_EQ(s.grant(100, std::vector<int64_t>{100000}), (std::vector<int64_t>{156}));
  // A full decode load still leaves a quarter of the budget to prefill (new requests get in).
  EXPECT_EQ(s.grant(1000, std::vector<int64_t>{100000}), (std::vector<int64_t>{64}));
  EXPECT_EQ(s.grant(0, std::vector<int64_t>{}), (std::vector<int64_t>{}));
}

TEST(StepScheduler, LongPromptsShareAndShortOnesFinish) {
  StepScheduler s(300, 2048);
  // Equal shares of 300 for three long prompts.
  const auto g = s.grant(0, std::vector<int64_t>{5000, 5000, 5000});
  EXPECT_EQ(g, (std::vector<int64_t>{100, 100, 100}));
  // A short prompt takes what it needs; the rest goes to the long one.
  const auto h = s.grant(0, std::vector<int64_t>{20, 5000});
  EXPECT_EQ(sum(h), 300);
  EXPECT_EQ(h[0] == 20 || h[1] == 20, true);
  EXPECT_EQ(h[0] + h[1], 300);
}

TEST(StepScheduler, SlicesAreCappedAtTheChunk) {
  StepScheduler s(10000, 512);
  EXPECT_EQ(s.grant(2, std::vector<int64_t>{9000, 9000}), (std::vector<int64_t>{512, 512}));
}

TEST(StepScheduler, RoundRobinServesEveryPromptWhenTheBudgetIsTight) {
  // Budget 2 for 5 prompts: every iteration serves two, and the cursor moves on, so after
  // a few iterations every prompt has been fed (none starves behind the first ones).
  StepScheduler s(2, 2048);
  std::vector<int64_t> fed(5, 0);
  for (int it = 0; it < 5; ++it) {
    const auto g = s.grant(0, std::vector<int64_t>(5, 100));
    EXPECT_EQ(sum(g), 2);
    for (size_t i = 0; i < 5; ++i) fed[i] += g[i];
  }
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(fed[i], 2) << i;
}

TEST(StepScheduler, RejectsABadChunk) { EXPECT_THROW(StepScheduler(100, 0), InputError); }

}  // namespace
}  // namespace ds4::engine
