#pragma once
// The host side of the CUDA models' decode_batch (continuous batching, issue #24), shared by
// the three families: the checks made before anything runs, and the split of the rows into
// single-sequence steps and batched forwards of up to `most` rows. The forward itself (the
// chunk code with one state per row) is each model's batch.cu.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/model.h"

namespace ds4 {

// As many tokens as states, no state twice, every token in [0, vocab), room for one more token
// in every context. Throws (InputError for bad input) before any state advances.
inline void check_decode_batch(const std::string& family, std::span<ModelState* const> states,
                               std::span<const int32_t> tokens, int64_t vocab, int64_t max_context) {
  if (states.size() != tokens.size())
    throw Error("decode_batch: " + std::to_string(states.size()) + " states for " + std::to_string(tokens.size()) +
                " tokens");
  std::set<const ModelState*> seen;
  for (size_t i = 0; i < states.size(); ++i) {
    if (!seen.insert(states[i]).second) throw InputError(family + ": decode_batch with the same state twice");
    if (tokens[i] < 0 || tokens[i] >= vocab)
      throw InputError(family + ": token id " + std::to_string(tokens[i]) + " outside [0, " + std::to_string(vocab) +
                       ")");
    if (states[i]->position() + 1 > max_context)
      throw InputError(family + ": context " + std::to_string(states[i]->position() + 1) + " exceeds max_context " +
                       std::to_string(max_context));
  }
}

// Runs the n rows of a decode_batch: the rows with single(i) true one by one as
// alone(i) (the model's own one-token step; its logits row into logits[i]), the others in
// order as batched forwards of up to `most` rows: together(rows) runs one forward over the row
// indices `rows` and returns its logits, {rows.size(), vocab} floats. A forward of one row runs
// as alone() too (the decode step is as fast and needs no batch graph). forwards(F) is told
// the number of batched forwards before the first one (the model's graph cache keeps 2 F).
// `logits` is resized to {n, vocab}.
inline void decode_in_forwards(size_t n, size_t most, int64_t vocab, std::vector<float>& logits,
                               const std::function<bool(size_t)>& single, const std::function<void(size_t)>& alone,
                               const std::function<void(size_t)>& forwards,
                               const std::function<const float*(std::span<const size_t>)>& together) {
  const size_t V = size_t(vocab);
  logits.resize(n * V);
  std::vector<size_t> batched;
  for (size_t i = 0; i < n; ++i) {
    if (single(i)) alone(i);
    else batched.push_back(i);
  }
  const size_t B = std::max<size_t>(most, 1);
  forwards((batched.size() + B - 1) / B);
  for (size_t b0 = 0; b0 < batched.size(); b0 += B) {
    const size_t b1 = std::min(batched.size(), b0 + B);
    if (b1 - b0 == 1) {
      alone(batched[b0]);
      continue;
    }
    const std::span<const size_t> rows(batched.data() + b0, b1 - b0);
    const float* out = together(rows);
    for (size_t k = 0; k < rows.size(); ++k)
      std::copy_n(out + k * V, V, logits.begin() + long(rows[k] * V));
  }
}

}  // namespace ds4
