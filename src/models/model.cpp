#include "models/model.h"

#include <algorithm>

namespace ds4 {

std::vector<float> Model::prefill(ModelState& state, std::span<const int32_t> tokens, int64_t chunk) {
  if (chunk <= 0) chunk = info().default_prefill_chunk;
  std::vector<float> logits;
  for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
    size_t n = std::min(size_t(chunk), tokens.size() - start);
    bool last = start + n == tokens.size();
    forward(state, tokens.subspan(start, n), last ? Logits::kLast : Logits::kNone, logits);
  }
  return logits;
}

std::vector<float> Model::decode(ModelState& state, int32_t token) {
  std::vector<float> logits;
  forward(state, std::span<const int32_t>(&token, 1), Logits::kLast, logits);
  return logits;
}

std::vector<float> Model::verify(ModelState& state, std::span<const int32_t> tokens) {
  std::vector<float> logits;
  forward(state, tokens, Logits::kAll, logits);
  return logits;
}

}  // namespace ds4
