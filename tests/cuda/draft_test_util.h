#pragma once
// Helpers of the CUDA draft-head tests (test_deepseek_v4_mtp_cuda, test_deepseek_v4_dspark_cuda):
// token rows, a drafting state fed in chosen forward sizes, and an error probe. The greedy
// speculative run and the trunk + head directory are tests/unit/common/draft_head_run.h.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::cuda_test {

// n ids (mul * i + add) % V: reproducible prompts without a tokenizer.
inline std::vector<int32_t> synthetic_tokens(int64_t n, int64_t mul, int64_t add, int64_t V) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((mul * i + add) % V));
  return t;
}

// A drafting state that consumed `toks`: in forwards of `chunk` tokens (0: one), then `steps`
// more of them one at a time.
inline std::unique_ptr<ModelState> consumed(Model& m, const std::vector<int32_t>& toks, size_t chunk = 0,
                                            size_t steps = 0) {
  auto st = m.new_state();
  m.draft_head()->enable_draft(*st);
  std::vector<float> lg;
  const size_t bulk = toks.size() - steps;
  if (!chunk) chunk = std::max<size_t>(bulk, 1);
  for (size_t i = 0; i < bulk; i += chunk)
    m.forward(*st, std::span<const int32_t>(toks.data() + i, std::min(chunk, bulk - i)), Logits::kNone, lg);
  for (size_t i = bulk; i < toks.size(); ++i) m.forward(*st, std::span<const int32_t>(&toks[i], 1), Logits::kNone, lg);
  return st;
}

// Whether f() throws a ds4::Error.
template <class F>
bool throws(F f) {
  try {
    f();
  } catch (const Error&) {
    return true;
  }
  return false;
}

}  // namespace ds4::cuda_test
