#pragma once
// The host side of the CUDA models' decode_batch (continuous batching, issue #24), shared by
// the three families: the checks made before anything runs, and the split of the rows into
// single-sequence steps and batched forwards of up to `most` rows. The forward itself (the
// chunk code with one state per row) is each model's batch.cu.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/model.h"

namespace ds4 {

// What decode_batch_rows asks of a CUDA model (State: its CudaState, with a host `pos`).
template <class State>
struct BatchHooks {
  State& (*state)(ModelState&);                        // the model's cuda_state
  std::function<bool(const State&)> single;            // runs as its own decode step
  std::function<void(size_t forwards)> begin;          // before the first batched forward
  // The pinned input row `row` of the state's next token (Qwen's PLE n-gram rows come from
  // the state's own token context).
  std::function<void(State&, int32_t token, int64_t row)> input;
  std::function<void(std::span<State* const>)> run;    // one batched forward, device counters += 1
  const float* logits = nullptr;                       // the pinned logits rows it leaves
};

// A CUDA model's decode_batch: checks everything first (check_decode_batch of model.h, the
// states' type), then runs the rows with single(state) true as the model's own one-token step
// (forward(kLast)), the others in order as batched forwards of up to `most` rows (a forward
// of one row runs as the step too: as fast, and no batch graph for it): their input rows,
// run(states), each state's host position += 1, the logits rows copied out. begin(F) is told
// the number of batched forwards first (the graph cache keeps 2 F). `logits`: {n, vocab}.
template <class State>
void decode_batch_rows(Model& m, const std::string& family, std::span<ModelState* const> states,
                       std::span<const int32_t> tokens, size_t most, std::vector<float>& logits,
                       const BatchHooks<State>& h) {
  const int64_t vocab = m.info().vocab_size;
  check_decode_batch(family + ": decode_batch", m.info(), states, tokens);
  std::vector<State*> sts;
  for (ModelState* s : states) sts.push_back(&h.state(*s));
  const size_t n = states.size(), V = size_t(vocab);
  logits.resize(n * V);
  std::vector<float> row;
  auto alone = [&](size_t i) {
    m.forward(*states[i], tokens.subspan(i, 1), Logits::kLast, row);
    std::copy(row.begin(), row.end(), logits.begin() + long(i * V));
  };
  std::vector<size_t> batched;
  for (size_t i = 0; i < n; ++i) {
    if (h.single(*sts[i])) alone(i);
    else batched.push_back(i);
  }
  const size_t B = std::max<size_t>(most, 1);
  h.begin((batched.size() + B - 1) / B);
  for (size_t b0 = 0; b0 < batched.size(); b0 += B) {
    const size_t b1 = std::min(batched.size(), b0 + B);
    if (b1 - b0 == 1) {
      alone(batched[b0]);
      continue;
    }
    std::vector<State*> batch;
    for (size_t k = b0; k < b1; ++k) {
      h.input(*sts[batched[k]], tokens[batched[k]], int64_t(k - b0));
      batch.push_back(sts[batched[k]]);
    }
    h.run(batch);
    for (size_t k = b0; k < b1; ++k) {
      sts[batched[k]]->pos += 1;
      std::copy_n(h.logits + (k - b0) * V, V, logits.begin() + long(batched[k] * V));
    }
  }
}

}  // namespace ds4
