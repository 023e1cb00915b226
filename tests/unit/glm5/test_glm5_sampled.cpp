// Sampled speculation with the GLM 5.x MTP head through the generic walks (engine/
// speculative.h) on ds4's sampler: opportunistic equals sampled AR (own drafts, a draft forced
// wrong at each position, all right + bonus, stop inside a draft); exact preserves the
// target's law (chi-square over fixed seeds), with the real head and with an oracle head. See tests/unit/common/sampled_spec_test_util.h.
#include <gtest/gtest.h>

#include "draft_head_test_util.h"
#include "golden.h"
#include "models/model.h"
#include "sampled_spec_test_util.h"

namespace ds4::glm5_test {
namespace {

class Glm5Sampled : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    m_ = draft_test::load_with_head("glm5_sampled", model_dir(), data_dir() + "/mtp/mtp.safetensors").release();
  }
  static void TearDownTestSuite() { delete m_; }
  static draft_test::SampledCase sc() {
    draft_test::SampledCase c;
    c.model = m_;
    const auto p = Golden().get<int32_t>("p64.tokens");
    c.prompt.assign(p.begin(), p.begin() + 8);
    return c;
  }
  static inline Model* m_ = nullptr;
};

TEST_F(Glm5Sampled, OpportunisticEqualsSampledAr) {
  for (int depth : {1, 3}) draft_test::expect_opportunistic_equals_sampled_ar(sc(), depth, 2);
}

TEST_F(Glm5Sampled, ExactPreservesTargetLaw) {
  // The real head (its drafts fall outside the target's top 2: the residual path), then an
  // oracle head over the same model and commit path (accepted and rejected drafts).
  draft_test::expect_exact_preserves_law(sc(), 3, 500);
  draft_test::OracleHeadModel oracle(*m_);
  draft_test::SampledCase o = sc();
  o.model = &oracle;
  draft_test::expect_exact_preserves_law(o, 2, 800, true);
}

}  // namespace
}  // namespace ds4::glm5_test
