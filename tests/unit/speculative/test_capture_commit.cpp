// Captured-prefix commit (Qwen MTP): after one captured verify window of n rows, keeping the
// first `keep` rows must give the state the target reaches by decoding those rows one at a
// time (AR), field by field: GDN recurrent + conv state, PLE context + conv history, QSA
// caches and pooled indexer blocks, the MTP head's pending rows, for every keep in 1..n and
// for windows that complete an indexer block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/speculative.h"
#include "models/draft_head.h"
#include "models/qwen_next/model.h"
#include "models/qwen_next/state.h"

namespace ds4::engine {
namespace {

using qwen_next::LayerState;
using qwen_next::State;

// Batched rows vs one-row decode differ in summation order only (matmul blocking): 2e-5
// relative to the largest magnitude of the compared vector.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  float worst = 0, scale = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  EXPECT_LE(worst, 2e-5f * scale) << what;
}

void expect_same(const State& got, const State& ar, const std::string& where) {
  ASSERT_EQ(got.pos, ar.pos) << where;
  ASSERT_EQ(got.layers.size(), ar.layers.size());
  for (size_t l = 0; l < ar.layers.size(); ++l) {
    const LayerState &g = got.layers[l], &r = ar.layers[l];
    const std::string at = where + " layer " + std::to_string(l);
    expect_close(g.conv, r.conv, at + " conv");
    expect_close(g.ssm, r.ssm, at + " ssm");
    EXPECT_EQ(g.ple_ctx, r.ple_ctx) << at << " ple_ctx";
    expect_close(g.ple_conv, r.ple_conv, at + " ple_conv");
    expect_close(g.k.flatten(), r.k.flatten(), at + " k");
    expect_close(g.v.flatten(), r.v.flatten(), at + " v");
    expect_close(g.idx_raw.flatten(), r.idx_raw.flatten(), at + " idx_raw");
    expect_close(g.idx_pooled.flatten(), r.idx_pooled.flatten(), at + " idx_pooled");
    EXPECT_FALSE(g.cap.on) << at;
    EXPECT_EQ(g.cap.bytes(), 0u) << at << ": capture records must be dropped";
  }
  EXPECT_TRUE(got.cap_tokens.empty()) << where;
  EXPECT_EQ(got.mtp_pos, ar.mtp_pos) << where;
  EXPECT_EQ(got.pending_next, ar.pending_next) << where;
  expect_close(got.pending_wide, ar.pending_wide, where + " mtp pending_wide");
  expect_close(got.last_wide, ar.last_wide, where + " mtp last_wide");
}

void check_model(const std::string& path, const std::vector<int32_t>& base_prompt) {
  auto m = load_model(path);
  ASSERT_NE(m->draft_head(), nullptr);
  auto& qm = dynamic_cast<qwen_next::QwenNextModel&>(*m);
  const int64_t R = qm.config().idx_ratio, V = m->info().vocab_size;
  const std::vector<int32_t> window = {int32_t(11 % V), int32_t(250 % V), int32_t(7 % V), int32_t(901 % V),
                                       int32_t(42 % V), int32_t(3 % V)};
  const int64_t n = int64_t(window.size());
  int crossed = 0;
  // Prompt lengths L..L+R-1: some windows complete an indexer block at every keep.
  for (int64_t extra = 0; extra < R; ++extra) {
    std::vector<int32_t> prompt = base_prompt;
    for (int64_t i = 0; i < extra; ++i) prompt.push_back(int32_t((100 + i) % V));
    auto base = m->new_state();
    m->draft_head()->enable_draft(*base);
    m->prefill(*base, prompt);
    std::vector<int32_t> drafts;
    m->draft_head()->draft(*base, window[0], 2, drafts);  // the head catches up, as in a cycle
    const int64_t pos0 = base->position();
    crossed += (pos0 / R) != ((pos0 + n) / R);
    for (int64_t keep = 1; keep <= n; ++keep) {
      auto got = base->clone();
      std::vector<float> rows;
      ASSERT_TRUE(m->draft_head()->verify_capture(*got, window, rows));
      ASSERT_EQ(rows.size(), size_t(n * V));
      m->draft_head()->commit_prefix(*got, keep);
      auto ar = base->clone();
      std::vector<float> last;
      for (int64_t i = 0; i < keep; ++i) m->forward(*ar, std::span<const int32_t>(&window[size_t(i)], 1), Logits::kLast, last);
      // The verify row keep-1 is the logits the committed state continues from.
      std::vector<float> row(rows.begin() + (keep - 1) * V, rows.begin() + keep * V);
      expect_close(row, last, "verify row " + std::to_string(keep - 1));
      const std::string where = path + " pos0 " + std::to_string(pos0) + " keep " + std::to_string(keep);
      expect_same(dynamic_cast<const State&>(*got), dynamic_cast<const State&>(*ar), where);
      // And both continue alike: next logits and the next draft.
      auto lg = m->decode(*got, 5), la = m->decode(*ar, 5);
      expect_close(lg, la, where + " next logits");
      std::vector<int32_t> dg, da;
      m->draft_head()->draft(*got, 9, 3, dg);
      m->draft_head()->draft(*ar, 9, 3, da);
      EXPECT_EQ(dg, da) << where;
    }
  }
  EXPECT_GT(crossed, 0) << "no window completed an indexer block";
}

TEST(CaptureCommit, EqualsArStateAtEveryKeepDefaultModel) {
  check_model(std::string(DS4_ROOT) + "/models/default",
              {8167, 345, 198, 2397, 0, 8168, 198, 8167, 360, 198, 8190, 302, 8191, 302});
}

TEST(CaptureCommit, EqualsArStateAtEveryKeepTinyModel) {
  check_model(std::string(DS4_TEST_DATA) + "/qwen_next/model", {5, 77, 301, 9, 12, 640, 33, 800, 2, 45});
}

TEST(CaptureCommit, RejectsBadKeep) {
  auto m = load_model(std::string(DS4_TEST_DATA) + "/qwen_next/model");
  auto s = m->new_state();
  m->draft_head()->enable_draft(*s);
  m->prefill(*s, std::vector<int32_t>{5, 6, 7});
  EXPECT_THROW(m->draft_head()->commit_prefix(*s, 1), std::exception);  // nothing captured
  std::vector<float> rows;
  const std::vector<int32_t> w = {1, 2, 3};
  ASSERT_TRUE(m->draft_head()->verify_capture(*s, w, rows));
  EXPECT_THROW(m->draft_head()->commit_prefix(*s, 0), std::exception);
  EXPECT_THROW(m->draft_head()->commit_prefix(*s, 4), std::exception);
  EXPECT_THROW(m->draft_head()->verify_capture(*s, w, rows), std::exception);  // uncommitted window
}

}  // namespace
}  // namespace ds4::engine
