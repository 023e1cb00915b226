// The GLM 5.x MTP head inside the generic greedy speculative loop (engine/speculative.h):
// output equals greedy AR token for token, with the random head's own drafts (mostly
// rejected: prefixes committed from the captured verify, no repair) and with drafts forced to the AR continuation (every draft
// accepted plus the bonus row), depths 1 and 3.
#include <gtest/gtest.h>

#include <filesystem>

#include "draft_head_test_util.h"
#include "golden.h"
#include "models/model.h"

namespace ds4::glm5_test {
namespace {

TEST(Glm5Spec, GreedySpeculativeEqualsAr) {
  const std::string dir = draft_test::trunk_with_head_dir("glm5_spec", model_dir(), data_dir() + "/mtp/mtp.safetensors");
  auto m = load_model(dir);
  std::filesystem::remove_all(dir);
  Golden g;
  draft_test::expect_speculative_equals_ar(*m, g.get<int32_t>("p64.tokens"), 1023, {1, 3});
}

}  // namespace
}  // namespace ds4::glm5_test
