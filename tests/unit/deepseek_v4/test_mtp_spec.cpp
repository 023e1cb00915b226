// ds4's MTP head inside the generic greedy speculative loop (engine/speculative.h): output
// equals greedy AR token for token, with the head's own drafts and with drafts forced to the
// AR continuation (all accepted + bonus), depths 1 and 3.
#include <gtest/gtest.h>

#include <filesystem>

#include "draft_head_test_util.h"
#include "golden.h"
#include "models/model.h"

namespace ds4_test {
namespace {

TEST(DeepseekMtpSpec, GreedySpeculativeEqualsAr) {
  const std::string dir = ds4::draft_test::trunk_with_head_dir(
      "ds4_spec", kModelDir, std::string(DS4_TEST_DATA) + "/deepseek_v4/mtp/mtp.safetensors");
  auto m = ds4::load_model(dir);
  std::filesystem::remove_all(dir);
  Golden g;
  ds4::draft_test::expect_speculative_equals_ar(*m, g.i32("p64.tokens"), 1, {1, 3});
}

}  // namespace
}  // namespace ds4_test
