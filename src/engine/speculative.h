#pragma once
// Speculative decoding over a model's draft head (models/draft_head.h).
//
// One cycle, given the token `next` the target already chose after the state's last token
// (MTPLX's "primary"):
//   draft D tokens with the head -> one batched verify of [next, d1..dD] (D+1 rows) on a
//   clone -> walk the rows along the acceptance path -> the next token -> commit.
// Acceptance per category (SPEC.md §2, chosen per turn by resolve_spec_category):
//   greedy         drafts are the head's argmax; accept d_k while argmax(row k-1) == d_k;
//                  the next token is argmax of the first row not accepted. No RNG draw.
//   opportunistic  greedy drafts; each row's target token is *sampled* with the turn's
//                  sampler; accept while it equals the draft. Distribution-preserving, but
//                  it spends one draw per row and accepts less than exact.
//   exact          MTPLX generate_mtpk: draft k is drawn from the head's filtered
//                  distribution q_k; the target distribution p_k of row k is materialized
//                  only when the walk reaches it (lazily); accept when u <= min(1, p/q)
//                  (u = one PCG64 random()); a rejection draws the correction from
//                  max(p - q, 0) renormalised (p when that is empty); all accepted -> the
//                  bonus is drawn from p_D. Draw order: q_1..q_D draws while drafting, then
//                  one uniform per reached row, then one residual or bonus draw. An accepted
//                  stop token ends the walk with no further draw.
// The draws come from the turn's own sampler stream (SpecDraws): MTPLX's PCG64 for Qwen, in
// MTPLX's exact order; ds4's xorshift64* for GLM / DeepSeek, whose dense distribution is
// ds4_distribution (the law of one ds4_sample draw), so opportunistic equals ds4's sampled AR.
// Depth in stochastic categories is min(D, budget) (MTPLX cycle_depth) so that the draw
// stream equals MTPLX's at the max_tokens edge too; the bonus is drawn only when tokens
// remain (accepted < budget).
//
// Commit (MTPLX capture_commit): the verify runs on the state itself while the head records
// per-row recurrent state (DraftHead::verify_capture); the kept prefix [next, d1..di] is then
// committed from those records (commit_prefix), without re-running anything. A head that
// cannot capture verifies on a clone: all rows kept -> the clone is the state; otherwise the
// original state re-runs the kept prefix (a counted "repair"). Nothing ever replays from the
// conversation start (full_replays stays 0).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/rng.h"
#include "engine/sampler.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::engine {

enum class SpecCategory { kTargetOnly, kGreedy, kOpportunistic, kExact };
const char* spec_category_name(SpecCategory c);
// "exact" | "opportunistic" | "greedy" | "target_only"; throws InputError naming the value.
SpecCategory parse_spec_category(const std::string& name);

// Per turn: target_only when speculation is off (or the category asked for stochastic turns
// is target_only), greedy when temperature <= 0, else the stochastic category.
SpecCategory resolve_spec_category(bool speculation_on, const SamplerParams& p, SpecCategory stochastic);

// DSpark confidence gate, resolved per turn (SPEC.md §2): an explicit value is kept as given
// (0 too); unset -> 0.6, raised to 0.8 only for a stochastic exact turn. Throws InputError
// for an explicit value outside [0, 1].
inline constexpr double kDsparkConfidenceDefault = 0.6;
inline constexpr double kDsparkConfidenceExact = 0.8;
double resolve_dspark_confidence(std::optional<double> user, SpecCategory category);

// The turn's sampler as the stochastic walks see it, for either golden master's sampler
// (SamplerKind): kMtplx continues the PCG64 stream in MTPLX's order; kDs4 continues ds4's
// xorshift64* stream, so the opportunistic walk draws exactly what sampled AR draws.
class SpecDraws {
 public:
  SpecDraws() = default;
  SpecDraws(SamplerKind kind, Pcg64* pcg, Ds4Rng* ds4) : kind_(kind), pcg_(pcg), ds4_(ds4) {}
  static SpecDraws of(Sampler& s) { return {s.kind(), &s.pcg(), &s.ds4_rng()}; }
  bool valid() const { return kind_ == SamplerKind::kMtplx ? pcg_ != nullptr : ds4_ != nullptr; }
  SamplerKind kind() const { return kind_; }
  // The token sampled AR would draw from `row` (one draw from the stream).
  int32_t sample(std::span<const float> row, const SamplerParams& p);
  // The sampler's filtered distribution of `row` (dense, float64, sums to 1).
  void distribution(std::span<const float> row, const SamplerParams& p, std::span<double> out) const;
  // One draw from a dense distribution (residual, bonus, draft), and one uniform in [0, 1).
  int32_t draw(std::span<const double> probs);
  double uniform();

 private:
  SamplerKind kind_ = SamplerKind::kMtplx;
  Pcg64* pcg_ = nullptr;
  Ds4Rng* ds4_ = nullptr;
};

struct SpecStats {
  int64_t cycles = 0;
  int64_t drafted = 0;       // draft tokens proposed
  int64_t accepted = 0;      // draft tokens the target agreed with
  int64_t bonus = 0;         // every draft accepted: next token from the row after the last
  int64_t corrections = 0;   // a rejected draft replaced by the target's token
  int64_t target_rows = 0;   // target distributions materialized (stochastic categories)
  int64_t prefix_commits = 0;  // partial acceptances committed from captured rows (no re-run)
  int64_t repairs = 0;       // partial acceptances re-run on the state (head cannot capture)
  int64_t full_replays = 0;  // always 0: never replays from the start
  double draft_s = 0, verify_s = 0, commit_s = 0;
  double acceptance() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  void add(const SpecStats& o);
};

struct SpecCycle {
  std::vector<int32_t> accepted;  // accepted drafts d1..di (already in the state)
  int32_t bonus = -1;             // the next token (bonus or correction); -1: the turn ends
  std::vector<float> logits;      // the row after the fed tokens: next position's logits {vocab}
};

struct SpecConfig {
  int depth = 3;
  SpecCategory category = SpecCategory::kGreedy;
  SamplerParams sampler;  // stochastic categories: the turn's sampler settings
  SamplerKind sampler_kind = SamplerKind::kMtplx;  // generate_sampled: which sampler draws
  bool capture_commit = true;  // captured-prefix commit when the head supports it
  // Exact: MTPLX's draft_sampler temperature; unset = the turn's. <= 0: argmax drafts with a
  // one-hot q and no draw (MTPLX _sample_draft_from_logits with a greedy draft sampler).
  std::optional<double> draft_temperature;
  // DSpark heads only: the confidence gate of this turn (resolve_dspark_confidence).
  double dspark_confidence = kDsparkConfidenceDefault;
};

class SpecDecoder {
 public:
  // Throws ds4::InputError when the model has no draft head or the depth is out of range.
  SpecDecoder(Model& model, int depth);
  // Stochastic categories draw from `draws` (the turn's sampler stream; it must outlive this).
  SpecDecoder(Model& model, const SpecConfig& config, SpecDraws draws);
  // The MTPLX sampler's PCG64 stream (nullptr: greedy only).
  SpecDecoder(Model& model, const SpecConfig& config, Pcg64* rng)
      : SpecDecoder(model, config, SpecDraws(SamplerKind::kMtplx, rng, nullptr)) {}
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
  // The cycle in steps, for a caller that verifies several sequences' windows in one
  // Model::verify_batch (continuous batching): draft_window() drafts (exactly cycle()'s
  // draws) and returns the verify window [next, d1..dD] (valid until the next call); the
  // caller runs the captured verify of that window on `state` itself; finish_captured()
  // walks its rows {D+1, vocab} and commits the kept prefix (DraftHead::commit_prefix),
  // exactly as cycle() does after its own verify_capture. verify_s: the verify's share of
  // time, for the stats.
  std::span<const int32_t> draft_window(ModelState& state, int32_t next, int64_t budget);
  void finish_captured(std::unique_ptr<ModelState>& state, std::span<const float> rows, double verify_s,
                       int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out);
  const SpecStats& stats() const { return stats_; }
  SpecCategory category() const { return cfg_.category; }
  const SpecConfig& config() const { return cfg_; }

 private:
  // Acceptance walk over the verify rows; fills out.accepted / out.bonus, returns whether
  // the turn stops inside the cycle. speculative_exact.cpp holds the stochastic ones.
  bool walk_greedy(int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out);
  bool walk_opportunistic(int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out);
  bool walk_exact(int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out);
  int32_t pick_exact(std::span<const float> row);
  // After the verify of row_tokens_ (rows in rows_): the acceptance walk and the commit,
  // from the captured window (trial null) or from the verified clone *trial.
  void walk_and_commit(std::unique_ptr<ModelState>& state, std::unique_ptr<ModelState>* trial, double verify_s,
                       int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out);
  void commit(std::unique_ptr<ModelState>& state, std::unique_ptr<ModelState>& trial, size_t feed);

  Model& model_;
  DraftHead& head_;
  SpecConfig cfg_;
  SpecDraws draws_;
  SpecStats stats_;
  std::vector<int32_t> drafts_, row_tokens_;
  std::vector<float> rows_;      // verify logits {D+1, vocab}
  std::vector<double> q_, p_;    // exact: draft distributions {D, vocab}; one target row {vocab}
  int pick_k_ = 0;               // exact: draft step being picked
};

// Greedy generation from `logits` (the state's last-position logits): emits up to
// max_tokens tokens, stopping after an EOS. depth 0 = plain AR (the reference). The state
// ends as AR leaves it: every emitted token but the last consumed.
std::vector<int32_t> generate_greedy(Model& model, std::unique_ptr<ModelState>& state, std::vector<float> logits,
                                     int64_t max_tokens, std::span<const int32_t> eos, int depth,
                                     SpecStats* stats = nullptr,
                                     std::function<void(std::vector<int32_t>&)> corrupt = {});

// Sampled generation with config.sampler_kind's sampler (seeded from params.seed), the way
// MTPLX's generate_ar (config.depth 0) and generate_mtpk (depth > 0, category exact or
// opportunistic) do: the first token is drawn from `logits`, then each cycle's next token
// comes from the walk. With the ds4 sampler depth 0 is ds4's sampled AR loop.
std::vector<int32_t> generate_sampled(Model& model, std::unique_ptr<ModelState>& state, std::vector<float> logits,
                                      int64_t max_tokens, std::span<const int32_t> eos, const SpecConfig& config,
                                      SpecStats* stats = nullptr,
                                      std::function<void(std::vector<int32_t>&)> corrupt = {});

int32_t argmax(const float* row, int64_t n);

}  // namespace ds4::engine
