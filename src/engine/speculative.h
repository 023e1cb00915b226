#pragma once
// Speculative decoding over a model's draft head (models/draft_head.h), greedy acceptance.
//
// One cycle, given the token `next` the target already chose after the state's last token:
//   draft D tokens with the head -> one batched verify of [next, d1..dD] (D+1 rows) on a
//   clone -> accept d_k while argmax(row k-1) == d_k -> bonus = argmax(row i) -> commit.
// Commit: the recurrent GDN state cannot be cut back, so when every draft is accepted the
// verified clone *is* the committed state; otherwise the original state re-runs only the
// accepted prefix [next, d1..di] (a "repair"). Nothing ever replays from the conversation
// start (full_replays stays 0).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::engine {

struct SpecStats {
  int64_t cycles = 0;
  int64_t drafted = 0;       // draft tokens proposed
  int64_t accepted = 0;      // draft tokens the target agreed with
  int64_t bonus = 0;         // target tokens taken from the verify rows
  int64_t repairs = 0;       // partial acceptances: accepted prefix re-run on the state
  int64_t full_replays = 0;  // always 0: never replays from the start
  double draft_s = 0, verify_s = 0, commit_s = 0;
  double acceptance() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  void add(const SpecStats& o);
};

struct SpecCycle {
  std::vector<int32_t> accepted;  // accepted drafts d1..di (already in the state)
  int32_t bonus = -1;             // argmax of the verify row after the accepted prefix
  std::vector<float> logits;      // that row: the next position's logits {vocab}
};

class SpecDecoder {
 public:
  // Throws ds4::InputError when the model has no draft head.
  SpecDecoder(Model& model, int depth);
  // Test hook: may rewrite the drafts before verification (forces rejections).
  std::function<void(std::vector<int32_t>&)> corrupt_draft;

  // One cycle: `state` consumes `next` and the accepted drafts. The accepted list stops at
  // the first token in `eos` (kept) and at `budget` tokens; then out.bonus = -1 (the turn
  // ends) and the last accepted token is not fed, exactly like AR (which never feeds the
  // token it stops on).
  void cycle(std::unique_ptr<ModelState>& state, int32_t next, int64_t budget, std::span<const int32_t> eos,
             SpecCycle& out);
  void cycle(std::unique_ptr<ModelState>& state, int32_t next, int64_t budget,
             const std::function<bool(int32_t)>& is_stop, SpecCycle& out);
  const SpecStats& stats() const { return stats_; }

 private:
  Model& model_;
  DraftHead& head_;
  int depth_;
  SpecStats stats_;
  std::vector<int32_t> drafts_, row_tokens_;
  std::vector<float> rows_;
};

// Greedy generation from `logits` (the state's last-position logits): emits up to
// max_tokens tokens, stopping after an EOS. depth 0 = plain AR (the reference). The state
// ends as AR leaves it: every emitted token but the last consumed.
std::vector<int32_t> generate_greedy(Model& model, std::unique_ptr<ModelState>& state, std::vector<float> logits,
                                     int64_t max_tokens, std::span<const int32_t> eos, int depth,
                                     SpecStats* stats = nullptr,
                                     std::function<void(std::vector<int32_t>&)> corrupt = {});

int32_t argmax(const float* row, int64_t n);

}  // namespace ds4::engine
