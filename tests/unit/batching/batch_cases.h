#pragma once
// The tiny models of every CPU family (draft heads on where the family has them) and the
// deterministic prompts the batching tests (decode_batch, verify_batch) run on.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "draft_head_run.h"
#include "family_model.h"
#include "models/model.h"

namespace ds4::batch_test {

inline const std::string kData = DS4_TEST_DATA;

struct Case {
  std::string tag, dir, head;  // head: draft head file merged into a temp folder (empty: none)
  bool native;                 // expected ModelInfo::batched_decode / batched_verify
  std::string extra = "";      // config merged into the temp folder (DSpark's settings)
};

inline std::unique_ptr<Model> load(const Case& c, int64_t max_context = 0) {
  return test::load_family_model(c.tag, c.dir, c.head, c.extra, max_context);
}

// Deterministic prompt ids in [1, vocab): different lengths and contents per sequence.
inline std::vector<int32_t> prompt(int64_t vocab, int seq, int len) {
  std::vector<int32_t> p;
  uint32_t x = 2654435761u * uint32_t(seq + 1);
  for (int i = 0; i < len; ++i) {
    x = x * 1664525u + 1013904223u;
    p.push_back(int32_t(1 + (x >> 8) % uint32_t(vocab - 1)));
  }
  return p;
}

inline int32_t argmax(std::span<const float> row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

// Every family, with and without its draft heads (Qwen's MTP is built into its checkpoint).
inline auto family_cases() {
  return ::testing::Values(
      Case{"glm5", kData + "/glm5/model", "", true},
      Case{"glm5_mtp", kData + "/glm5/model", kData + "/glm5/mtp/mtp.safetensors", true},
      Case{"qwen_next", kData + "/qwen_next/model", "", true},
      Case{"deepseek_v4", kData + "/deepseek_v4/model", "", true},
      Case{"deepseek_v4_mtp", kData + "/deepseek_v4/model", kData + "/deepseek_v4/mtp/mtp.safetensors", true},
      Case{"deepseek_v4_dspark", kData + "/deepseek_v4/model", kData + "/deepseek_v4/dspark/dspark.safetensors", true,
           kData + "/deepseek_v4/dspark/dspark_config.json"});
}

}  // namespace ds4::batch_test
