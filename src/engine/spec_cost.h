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
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
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

// Under load (issue #24) the engine runs the AR steps of N streams as ONE batched forward of
// N rows and the cycles' verifies as one forward of N (depth+1) rows, so the question is
// whether N (depth+1) rows plus N drafts emit tokens faster than N rows: on a memory-bound GPU
// extra rows are nearly free, on a compute-bound CPU they cost about what they weigh, and a
// GPU's large batches become compute-bound too. The engine measures the forward time by row
// count (RowCostCurve) and decides at the number of streams decoding when a turn starts:
//   AR per token and stream:   T(N) / N
//   a cycle per stream:        draft + T(N (depth+1)) / N + commit, emitting E(a) tokens.
// With N = 1 this is decide_speculation's single-stream comparison.

// Forward seconds by row count: an exponentially weighted mean per power-of-two bucket of rows
// (bucket b holds 2^b .. 2^(b+1) - 1 rows, its mean row count kept beside its mean time), read
// by linear interpolation between the buckets' points and past the last one along the slope of
// the last two (never below the last point: more rows never cost less). Not thread-safe (the
// SpecCostModel holding it locks).
class RowCostCurve {
 public:
  static constexpr int kBuckets = 16;  // up to 65535 rows; more are counted in the last bucket
  void observe(int64_t rows, double seconds);
  std::optional<double> seconds(int64_t rows) const;  // nullopt: nothing observed yet
  int points() const;

 private:
  struct Point {
    double rows = 0, seconds = 0;
    int64_t count = 0;
  };
  std::array<Point, kBuckets> b_{};
};

// Expected tokens per cycle at per-draft acceptance a in [0, 1].
double spec_tokens_per_cycle(double acceptance, int depth);
// On when the expected speedup is at least `margin` (a little over 1: timing noise and the
// work a cycle does outside the measured forwards must not turn a tie into a slowdown).
inline constexpr double kSpecMargin = 1.05;
SpecCostDecision decide_speculation(const SpecCostInputs& in, double margin = kSpecMargin);
// Which forwards the engine runs together for several streams (batching on and the model's
// ModelInfo::batched_decode / batched_verify): a side that is not batched costs what one
// stream's forward costs, once per stream.
struct BatchedForwards {
  bool decode = true, verify = true;
};
// The same decision for `streams` streams decoding together: decode_s and verify_s replaced by
// the per-stream shares of the batched forwards read from `curve` (the inputs alone when
// streams <= 1, nothing is batched, or the curve has not seen a forward yet).
SpecCostDecision decide_speculation_at(const SpecCostInputs& in, const RowCostCurve& curve, int64_t streams,
                                       BatchedForwards batched = {}, double margin = kSpecMargin);

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
  // it at the context the chats really have): moves decode_s by 1/64 of the difference, and is
  // the row-cost curve's 1-row observation.
  void observe_decode(double step_s);
  // One forward of `rows` rows as the engine runs it (a single step, a batched decode of N
  // streams, a verify of one or many windows): the row-cost curve of the load-aware decision.
  void observe_rows(int64_t rows, double seconds);
  bool measured() const;
  SpecCostInputs inputs() const;
  SpecCostDecision decision() const { return decide_speculation(inputs()); }
  // The decision for `streams` streams decoding together (decide_speculation_at).
  SpecCostDecision decision_at(int64_t streams, BatchedForwards batched = {}) const;

 private:
  mutable std::mutex mu_;
  SpecCostInputs in_;
  RowCostCurve curve_;
  bool measured_ = false;
};

}  // namespace ds4::engine
