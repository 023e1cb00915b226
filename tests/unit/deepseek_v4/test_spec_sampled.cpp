// Sampled speculation on DeepSeek V4 through the generic walks (engine/speculative.h) on
// ds4's sampler, with ds4's MTP head and with the DSpark drafter (gate 0: every draft kept):
// opportunistic equals sampled AR (own drafts, a draft forced wrong at each position, all
// right + bonus, stop inside a draft); exact preserves the target's law (chi-square over
// fixed seeds), with the real heads and with an oracle head over the same commit path. See tests/unit/common/sampled_spec_test_util.h.
#include <gtest/gtest.h>

#include <filesystem>

#include "draft_head_test_util.h"
#include "golden.h"
#include "models/model.h"
#include "sampled_spec_test_util.h"

namespace ds4_test {
namespace {

std::unique_ptr<ds4::Model> open_with(const std::string& tag, const std::string& head, const std::string& extra = "") {
  return ds4::draft_test::load_with_head(tag, kModelDir, head, extra);
}

ds4::draft_test::SampledCase sc(ds4::Model& m) {
  ds4::draft_test::SampledCase c;
  c.model = &m;
  const auto p = Golden().i32("p64.tokens");
  c.prompt.assign(p.begin(), p.begin() + 8);
  return c;
}

const std::string kData = std::string(DS4_TEST_DATA) + "/deepseek_v4";

TEST(DeepseekSpecSampled, MtpOpportunisticEqualsSampledAr) {
  auto m = open_with("ds4_sampled_mtp", kData + "/mtp/mtp.safetensors");
  for (int depth : {1, 3}) ds4::draft_test::expect_opportunistic_equals_sampled_ar(sc(*m), depth, 2);
}

TEST(DeepseekSpecSampled, MtpExactPreservesTargetLaw) {
  // The real head (its drafts fall outside the target's top 2: the residual path), then an
  // oracle head over the same model and commit path (accepted and rejected drafts).
  auto m = open_with("ds4_sampled_mtp_x", kData + "/mtp/mtp.safetensors");
  ds4::draft_test::expect_exact_preserves_law(sc(*m), 3, 500);
  ds4::draft_test::OracleHeadModel oracle(*m);
  ds4::draft_test::SampledCase o = sc(*m);
  o.model = &oracle;
  ds4::draft_test::expect_exact_preserves_law(o, 2, 800, true);
}

TEST(DeepseekSpecSampled, DsparkOpportunisticAndExact) {
  auto m = open_with("ds4_sampled_dspark", kData + "/dspark/dspark.safetensors", kData + "/dspark/dspark_config.json");
  ds4::draft_test::expect_opportunistic_equals_sampled_ar(sc(*m), 3, 2);
  ds4::draft_test::expect_exact_preserves_law(sc(*m), 3, 400);
}

}  // namespace
}  // namespace ds4_test
