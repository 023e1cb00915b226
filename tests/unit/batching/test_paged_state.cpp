// Paged per-position caches (core/paged_rows.h) in every CPU family's state (issue #24): a
// clone (the prefix cache's entry, a snapshot, a speculative trial) shares the cache blocks
// instead of copying them, the two then diverge without seeing each other's rows (copy on
// write), and each continues bit for bit as a state that never shared anything.
#include <gtest/gtest.h>

#include <cstring>

#include "core/paged_rows.h"
#include "family_model.h"
#include "models/model.h"

namespace ds4 {
namespace {

const std::string kData = DS4_TEST_DATA;

struct Case {
  std::string tag, dir;
};

class PagedStateOf : public ::testing::TestWithParam<Case> {};

constexpr int kPrompt = 704;  // 11 blocks of 64 positions: most of a state's rows sit in full blocks

int32_t prompt_id(int i) { return 2 + i * 13 % 900; }

void prefill(Model& m, ModelState& st, std::vector<float>& logits) {
  for (int c0 = 0; c0 < kPrompt; c0 += 64) {
    std::vector<int32_t> ids;
    for (int i = c0; i < c0 + 64; ++i) ids.push_back(prompt_id(i));
    m.forward(st, ids, Logits::kLast, logits);
  }
}

// Ten decode steps from a fixed token stream; returns the logits of each step.
std::vector<std::vector<float>> decode(Model& m, ModelState& st, int32_t first) {
  std::vector<std::vector<float>> out;
  std::vector<float> logits;
  for (int i = 0; i < 10; ++i) {
    const int32_t id = int32_t((first + i * 37) % 1000 + 2);
    m.forward(st, {&id, 1}, Logits::kLast, logits);
    out.push_back(logits);
  }
  return out;
}

void expect_bitwise(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                    const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0) << what << ", step " << i;
  }
}

TEST_P(PagedStateOf, ClonesShareBlocksAndDivergeExactly) {
  const Case& c = GetParam();
  auto m = test::load_family_model(c.tag, c.dir, "");
  std::vector<float> logits;

  // What each continuation gives from a state that shares nothing (its own prefill).
  std::vector<std::vector<float>> alone_a, alone_b;
  {
    auto s = m->new_state();
    prefill(*m, *s, logits);
    alone_a = decode(*m, *s, 11);
  }
  {
    auto s = m->new_state();
    prefill(*m, *s, logits);
    alone_b = decode(*m, *s, 500);
  }

  const size_t base = PagedRows::live_block_bytes();
  auto st = m->new_state();
  prefill(*m, *st, logits);
  const size_t one = PagedRows::live_block_bytes() - base;
  ASSERT_GT(one, 0u) << "the family's per-position caches are paged";

  auto copy = st->clone();
  EXPECT_EQ(PagedRows::live_block_bytes() - base, one) << "a clone copies no cache rows";

  // Interleaved, so that each write meets blocks the other still references.
  std::vector<std::vector<float>> got_a, got_b;
  for (int i = 0; i < 10; ++i) {
    const int32_t ia = int32_t((11 + i * 37) % 1000 + 2), ib = int32_t((500 + i * 37) % 1000 + 2);
    m->forward(*st, {&ia, 1}, Logits::kLast, logits);
    got_a.push_back(logits);
    m->forward(*copy, {&ib, 1}, Logits::kLast, logits);
    got_b.push_back(logits);
  }
  expect_bitwise(got_a, alone_a, "the original after the clone");
  expect_bitwise(got_b, alone_b, "the clone");
  // Only the blocks the two wrote into were copied: far less than a second whole state.
  const size_t both = PagedRows::live_block_bytes() - base;
  EXPECT_LE(both, one + one / 2) << "one state " << one << " bytes, both " << both;

  st.reset();
  copy.reset();
  EXPECT_EQ(PagedRows::live_block_bytes(), base) << "every block is returned";
}

INSTANTIATE_TEST_SUITE_P(Families, PagedStateOf,
                         ::testing::Values(Case{"glm5", kData + "/glm5/model"},
                                           Case{"qwen_next", kData + "/qwen_next/model"},
                                           Case{"deepseek_v4", kData + "/deepseek_v4/model"}),
                         [](const auto& info) { return info.param.tag; });

}  // namespace
}  // namespace ds4
