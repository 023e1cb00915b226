// ds4's MTP draft head on CPU (src/models/deepseek_v4/mtp.cpp) against the torch reference
// (tests/data/deepseek_v4/mtp, cases pNh<N+1>: a head row for every consumed position):
// logits within 1e-3, drafts exact, chunked prefill drafts the same, drafting leaves the
// state unchanged, save/load keeps the head's history.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include "core/error.h"
#include "draft_head_test_util.h"
#include "golden.h"
#include "models/deepseek_v4/model.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4_test {
namespace {

constexpr int kDepth = 3;  // the reference has 4 rows: row 0 + 3 drafts

class DeepseekMtp : public ds4::draft_test::DraftHeadSuite<DeepseekMtp> {
 protected:
  static void SetUpTestSuite() {
    const std::string data = std::string(DS4_TEST_DATA) + "/deepseek_v4/mtp";
    open(ds4::draft_test::trunk_with_head_dir("ds4_mtp", kModelDir, data + "/mtp.safetensors"),
         data + "/golden_mtp.safetensors");
  }
  // prompt + next_token consumed (chunk 0: one shot) by a head-enabled state
  static std::unique_ptr<ds4::ModelState> consumed(const std::string& k, size_t chunk = 0) {
    std::vector<int32_t> toks = ref<int32_t>(k + ".tokens");
    toks.push_back(ref<int32_t>(k + ".next_token")[0]);
    return prefilled(toks, chunk);
  }
};

TEST_F(DeepseekMtp, HeadOnlyWhenTheCheckpointHasIt) {
  EXPECT_NE(model_->draft_head(), nullptr);
  auto plain = ds4::load_model(kModelDir);
  EXPECT_EQ(plain->draft_head(), nullptr);
}

TEST_F(DeepseekMtp, DraftLogitsMatchTheReference) {
  for (const char* c : {"p7h8", "p64h65", "p300h301"}) {
    const std::string k = c;
    auto st = consumed(k);
    const auto want = ref<float>(k + ".draft_logits");
    const auto want_d = ref<int32_t>(k + ".drafts");
    std::vector<float> lg;
    std::vector<int32_t> d;
    ds4::deepseek_v4::mtp_draft_logits(*model_, *st, want_d[0], kDepth, lg, d);
    ASSERT_EQ(lg.size(), want.size()) << k;
    const float diff = max_abs_diff(lg.data(), want.data(), lg.size());
    EXPECT_LE(diff, kLogitTol) << k;
    EXPECT_EQ(d, std::vector<int32_t>(want_d.begin() + 1, want_d.end())) << k;
    std::printf("deepseek mtp %s: max |draft logit diff| %.3g\n", c, diff);
  }
}

TEST_F(DeepseekMtp, ChunkedPrefillAndDraftingLeaveTheSameState) {
  auto one = consumed("p64h65");
  const int32_t d0 = ref<int32_t>("p64h65.drafts")[0];
  std::vector<float> a, b;
  std::vector<int32_t> da, db;
  std::vector<ds4::StateSection> before, after;
  one->save(before);
  ds4::deepseek_v4::mtp_draft_logits(*model_, *one, d0, kDepth, a, da);
  one->save(after);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i].bytes, after[i].bytes) << before[i].name;
  for (size_t chunk : {1u, 5u}) {
    auto st = consumed("p64h65", chunk);
    ds4::deepseek_v4::mtp_draft_logits(*model_, *st, d0, kDepth, b, db);
    EXPECT_EQ(da, db) << chunk;
    EXPECT_LE(max_abs_diff(a.data(), b.data(), a.size()), 1e-4f) << chunk;
  }
  // save -> load into a fresh state keeps the head's history
  auto fresh = model_->new_state();
  fresh->load(before);
  ds4::deepseek_v4::mtp_draft_logits(*model_, *fresh, d0, kDepth, b, db);
  EXPECT_EQ(da, db);
  EXPECT_EQ(max_abs_diff(a.data(), b.data(), a.size()), 0.0f);
}

TEST_F(DeepseekMtp, BadInputsAreInputErrors) {
  auto st = model_->new_state();
  std::vector<float> lg;
  std::vector<int32_t> d;
  EXPECT_THROW(ds4::deepseek_v4::mtp_draft_logits(*model_, *st, 0, 1, lg, d), ds4::InputError);
  auto ok = consumed("p7h8");
  EXPECT_THROW(ds4::deepseek_v4::mtp_draft_logits(*model_, *ok, 1024, 1, lg, d), ds4::InputError);
  EXPECT_THROW(ds4::deepseek_v4::mtp_draft_logits(*model_, *ok, 0, -1, lg, d), ds4::InputError);
  EXPECT_THROW(model_->draft_head()->enable_draft(*ok), ds4::InputError);
}

}  // namespace
}  // namespace ds4_test
