#pragma once
// Family-neutral draft head for speculative decoding (Qwen MTP today; GLM MTP and DSpark
// plug in the same way). The speculative loop (engine/speculative.h) only sees this.
#include <cstdint>
#include <functional>
#include <string>
#include <span>
#include <vector>

#include "models/model.h"

namespace ds4 {

class DraftHead {
 public:
  virtual ~DraftHead() = default;
  // Makes `state` keep whatever history the head needs; call before the first forward.
  virtual void enable_draft(ModelState& state) const = 0;
  // Greedy chain of `depth` draft tokens that follow `next_token` (the token the target
  // chose after the state's last consumed token). Must leave `state` unchanged.
  virtual void draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) = 0;
  // The same chain with draft token k chosen by `pick` from the head's logits row {vocab}
  // (exact speculative sampling draws it from the sampler's distribution) and fed back as
  // step k+1's input. Returns false when the head only drafts greedily; the exact walk then
  // treats its argmax drafts as a point-mass proposal (MTPLX's greedy draft sampler).
  using Pick = std::function<int32_t(std::span<const float> row)>;
  virtual bool draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                            std::vector<int32_t>& drafts) {
    (void)state, (void)next_token, (void)depth, (void)pick, (void)drafts;
    return false;
  }

  // draft() under a turn's confidence gate (SPEC §2, resolved per turn by the engine): heads
  // with a confidence head (DSpark) keep only the leading drafts whose confidence is at least
  // `min_confidence` (0 keeps all: draft()); heads without one ignore it. An argument, not the
  // head's state: concurrent turns on the one shared model each draft under their own gate.
  virtual void draft_gated(ModelState& state, int32_t next_token, int depth, double min_confidence,
                           std::vector<int32_t>& drafts) {
    (void)min_confidence;
    draft(state, next_token, depth, drafts);
  }

  // Captured-prefix commit (MTPLX capture_commit). verify_capture(): the batched verify
  // forward (Logits::kAll) that also records, in `trial`, the per-row state a recurrent
  // model cannot cut back (GDN recurrent/conv state, PLE history, MTP rows). Returns false
  // when the family cannot capture; the loop then re-runs the kept prefix on the original
  // state instead (a counted repair). commit_prefix(): turns `trial` into the state after
  // its first `keep` verified rows (1 <= keep <= rows) from those records, and drops them.
  virtual bool verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) {
    (void)trial, (void)tokens, (void)logits;
    return false;
  }
  virtual void commit_prefix(ModelState& trial, int64_t keep) { (void)trial, (void)keep; }
};

// A family's verify_capture: `begin` arms the records, one batched Logits::kAll forward, `end`
// keeps them for commit_prefix; `abort` drops them when the forward throws.
template <class Begin, class End, class Abort>
bool captured_verify(Model& m, ModelState& s, std::span<const int32_t> tokens, std::vector<float>& logits,
                     Begin begin, End end, Abort abort) {
  begin();
  try {
    m.forward(s, tokens, Logits::kAll, logits);
  } catch (...) {
    abort();
    throw;
  }
  end();
  return true;
}

// A family's Model::verify_batch: the argument checks; false (nothing run) without a draft
// head; else `begin(state)` arms each state's records, `run()` is the one forward over every
// window (it fills `logits`), `end(state, window)` keeps each state's records for
// commit_prefix; when anything throws, `abort(state)` drops the records of every state armed
// so far.
template <class Begin, class Run, class End, class Abort>
bool captured_verify_batch(Model& m, std::span<ModelState* const> states,
                           std::span<const std::span<const int32_t>> windows, std::vector<float>& logits,
                           const std::string& who, Begin begin, Run run, End end, Abort abort) {
  check_batch(who, m.info(), states, windows);
  logits.clear();
  if (!m.draft_head()) return false;
  size_t armed = 0;
  try {
    for (; armed < states.size(); ++armed) begin(*states[armed]);
    run();
  } catch (...) {
    for (size_t i = 0; i < armed; ++i) abort(*states[i]);
    throw;
  }
  for (size_t i = 0; i < states.size(); ++i) end(*states[i], windows[i]);
  return true;
}

}  // namespace ds4
