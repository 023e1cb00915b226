// MTPLX's DSpark drafter on CPU (src/models/deepseek_v4/dspark.cpp) against the torch
// reference (tests/data/deepseek_v4/dspark, tools/reference/deepseek_v4/dspark_mtplx_ref.py):
// draft logits within 1e-3, drafts and gate prefixes exact, confidences within 1e-4; chunked
// prefill drafts the same, drafting leaves the state unchanged, save/load keeps the rings;
// in the generic greedy speculative loop the output equals greedy AR.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "draft_head_test_util.h"
#include "golden.h"
#include "models/deepseek_v4/model.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4_test {
namespace {

const std::string kDir = std::string(DS4_TEST_DATA) + "/deepseek_v4/dspark";

class DeepseekDspark : public ds4::draft_test::DraftHeadSuite<DeepseekDspark> {
 protected:
  // The trunk + dspark.safetensors, with dspark_config.json merged into config.json.
  static void SetUpTestSuite() {
    open(ds4::draft_test::trunk_with_head_dir("ds4_dspark", kModelDir, kDir + "/dspark.safetensors",
                                              kDir + "/dspark_config.json"),
         kDir + "/golden_dspark.safetensors");
  }
  // the prompt consumed (chunk 0: one shot) by a drafter-enabled state
  static std::unique_ptr<ds4::ModelState> consumed(const std::string& k, size_t chunk = 0) {
    return prefilled(ref<int32_t>(k + ".tokens"), chunk);
  }
  struct Out {
    std::vector<float> logits, conf;
    std::vector<int32_t> drafts;
  };
  static Out draft(ds4::ModelState& st, int32_t primary) {
    Out o;
    ds4::deepseek_v4::dspark_draft_details(*model_, st, primary, o.logits, o.drafts, o.conf);
    return o;
  }
};

int gate(const std::vector<float>& conf, float t) {
  int k = 0;
  while (k < int(conf.size()) && conf[size_t(k)] >= t) ++k;
  return k;
}

TEST_F(DeepseekDspark, DraftsMatchTheReference) {
  for (const char* c : {"p1", "p7", "p64", "p300"}) {
    const std::string k = c;
    auto st = consumed(k);
    const Out o = draft(*st, ref<int32_t>(k + ".primary")[0]);
    const auto want = ref<float>(k + ".draft_logits");
    ASSERT_EQ(o.logits.size(), want.size()) << k;
    const float diff = max_abs_diff(o.logits.data(), want.data(), want.size());
    EXPECT_LE(diff, kLogitTol) << k;
    EXPECT_EQ(o.drafts, ref<int32_t>(k + ".drafts")) << k;
    const auto conf = ref<float>(k + ".confidence");
    ASSERT_EQ(o.conf.size(), conf.size());
    const float cdiff = max_abs_diff(o.conf.data(), conf.data(), conf.size());
    EXPECT_LE(cdiff, 1e-4f) << k;
    const auto prefix = ref<int32_t>(k + ".gate_prefix");
    EXPECT_EQ(gate(o.conf, 0.6f), prefix[0]) << k;
    EXPECT_EQ(gate(o.conf, 0.8f), prefix[1]) << k;
    std::printf("deepseek dspark %s: max |draft logit diff| %.3g, max |confidence diff| %.3g\n", c, diff, cdiff);
  }
}

TEST_F(DeepseekDspark, ChunkedPrefillDraftingAndSaveLoadKeepTheState) {
  const int32_t primary = ref<int32_t>("p64.primary")[0];
  auto one = consumed("p64");
  std::vector<ds4::StateSection> before, after;
  one->save(before);
  const Out a = draft(*one, primary);
  one->save(after);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i].bytes, after[i].bytes) << before[i].name;
  for (size_t chunk : {1u, 7u}) {  // ring rows appended chunk by chunk, window 16 crossed
    auto st = consumed("p64", chunk);
    const Out b = draft(*st, primary);
    EXPECT_EQ(a.drafts, b.drafts) << chunk;
    EXPECT_LE(max_abs_diff(a.logits.data(), b.logits.data(), a.logits.size()), 1e-4f) << chunk;
  }
  auto fresh = model_->new_state();
  fresh->load(before);
  const Out c = draft(*fresh, primary);
  EXPECT_EQ(a.drafts, c.drafts);
  EXPECT_EQ(max_abs_diff(a.logits.data(), c.logits.data(), a.logits.size()), 0.0f);
  // the DraftHead interface hands out the first `depth` futures of the same pass
  std::vector<int32_t> d;
  model_->draft_head()->draft(*one, primary, 3, d);
  EXPECT_EQ(d, std::vector<int32_t>(a.drafts.begin(), a.drafts.begin() + 3));
}

// SPEC §2's gate through the DraftHead interface: the drafts are the leading rows whose
// confidence reaches the threshold, exactly the reference's gate prefixes.
TEST_F(DeepseekDspark, ConfidenceGateKeepsTheReferencePrefix) {
  ds4::DraftHead* head = model_->draft_head();
  for (const char* c : {"p7", "p64", "p300"}) {
    const std::string k = c;
    auto st = consumed(k);
    const int32_t primary = ref<int32_t>(k + ".primary")[0];
    const auto all = ref<int32_t>(k + ".drafts");
    const auto prefix = ref<int32_t>(k + ".gate_prefix");
    std::vector<int32_t> d;
    for (int i : {0, 1}) {
      head->draft_gated(*st, primary, 5, i == 0 ? 0.6 : 0.8, d);
      EXPECT_EQ(d, std::vector<int32_t>(all.begin(), all.begin() + prefix[size_t(i)])) << k << " gate " << i;
    }
    head->draft_gated(*st, primary, 5, 0.0, d);
    EXPECT_EQ(d, all) << k;
    head->draft(*st, primary, 5, d);  // ungated: the gate of the previous call is not kept
    EXPECT_EQ(d, all) << k;
  }
}

// engine/speculative.h with DSpark drafts (own, or forced to the AR continuation so every
// draft is accepted and the bonus token is used), depths 1 and 4.
TEST_F(DeepseekDspark, GreedySpeculativeEqualsAr) {
  ds4::draft_test::expect_speculative_equals_ar(*model_, ref<int32_t>("p64.tokens"), 1, {1, 4});
}

TEST_F(DeepseekDspark, BadInputsAreInputErrors) {
  auto st = model_->new_state();
  model_->draft_head()->enable_draft(*st);
  std::vector<ds4::StateSection> sec;  // an enabled, empty state round-trips
  st->save(sec);
  EXPECT_NO_THROW(model_->new_state()->load(sec));
  std::vector<int32_t> d;
  EXPECT_THROW(model_->draft_head()->draft(*st, 0, 2, d), ds4::InputError);  // no context row yet
  auto ok = consumed("p7");
  EXPECT_THROW(model_->draft_head()->draft(*ok, 1024, 2, d), ds4::InputError);
  EXPECT_THROW(model_->draft_head()->draft(*ok, 0, -1, d), ds4::InputError);
  EXPECT_THROW(model_->draft_head()->enable_draft(*ok), ds4::InputError);
}

}  // namespace
}  // namespace ds4_test
