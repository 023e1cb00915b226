#pragma once
// Whether speculative decoding is expected to be faster than plain decoding on this model
// and backend (issue #25: on the CPU with the default model it ran at 0.75x AR). A cycle
// drafts `depth` tokens with the head and verifies depth+1 rows in one target forward; it
// emits the accepted drafts plus one token (bonus or correction). With a per-draft acceptance
// a (each draft accepted given the ones before it were), the expected tokens per cycle are
//   E(a) = 1 + a + a^2 + ... + a^depth
// and the expected speedup over AR is E(a) * decode_s / (draft_s + verify_s + commit_s).
// The costs are measured on the engine's model at start (engine_spec_warmup.cpp) and then
// follow the live cycles; the acceptance starts from a prior and follows the turns that
// speculated. Pure arithmetic here: unit-tested without a model.
#include <cstdint>
#include <mutex>
#include <string>

namespace ds4::engine {

struct SpecCostInputs {
  int depth = 3;
  double decode_s = 0;  // one AR decode forward (1 row)
  double verify_s = 0;  // one verify forward of depth+1 rows (every row's logits)
  double draft_s = 0;   // the head drafting `depth` tokens
  double commit_s = 0;  // keeping a partial acceptance (0 until a live cycle measured it)
  double acceptance = 0;       // per-draft acceptance used for the decision
  int64_t observed_drafted = 0, observed_accepted = 0;  // live turns (0: the prior alone)
  std::string source;          // "warmup" or "warmup+live"
};

struct SpecCostDecision {
  bool enabled = false;
  double tokens_per_cycle = 0;  // E(acceptance)
  double cycle_s = 0;           // draft + verify + commit
  double speedup = 0;           // expected tokens/s relative to AR
  // The acceptance at which speculation breaks even (speedup 1); > 1 when even accepting
  // every draft cannot pay for the cycle (verify of depth+1 rows too dear on this backend).
  double break_even_acceptance = 0;
  std::string reason;           // one line for logs, /health and the receipt
};

// Expected tokens per cycle at per-draft acceptance a in [0, 1].
double spec_tokens_per_cycle(double acceptance, int depth);
// On when the expected speedup is at least `margin` (a little over 1: timing noise and the
// work a cycle does outside the measured forwards must not turn a tie into a slowdown).
inline constexpr double kSpecMargin = 1.05;
SpecCostDecision decide_speculation(const SpecCostInputs& in, double margin = kSpecMargin);

// The engine's running cost model: warmup costs, then exponentially weighted live cycle
// costs and the pooled acceptance of the turns that speculated, shrunk toward a prior
// until enough drafts were seen. Thread-safe (the engine thread writes, /health reads).
class SpecCostModel {
 public:
  static constexpr double kPriorAcceptance = 0.7;  // typical MTP acceptance on real text
  static constexpr double kPriorDrafts = 32;       // the prior weighs as much as 32 drafts
  void set_warmup(int depth, double decode_s, double verify_s, double draft_s);
  // One speculating turn: its cycles, drafts, acceptances and time in each phase.
  void observe(int64_t cycles, int64_t drafted, int64_t accepted, double draft_s, double verify_s, double commit_s);
  // One AR decode step of a turn that did not speculate (forward + draw, as the engine runs
  // it at the context the chats really have): moves decode_s by 1/64 of the difference.
  void observe_decode(double step_s);
  bool measured() const;
  SpecCostInputs inputs() const;
  SpecCostDecision decision() const { return decide_speculation(inputs()); }

 private:
  mutable std::mutex mu_;
  SpecCostInputs in_;
  bool measured_ = false;
};

}  // namespace ds4::engine
