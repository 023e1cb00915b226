// Speculative decoding loop: draft, verify, commit, and the greedy acceptance walk; see
// speculative.h for the cycle. The stochastic walks live in speculative_exact.cpp.
#include "engine/speculative.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace ds4::engine {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

DraftHead& head_of(Model& m) {
  DraftHead* h = m.draft_head();
  if (!h) throw InputError("speculative: model '" + m.info().name + "' has no draft head");
  return *h;
}
bool is_eos(std::span<const int32_t> eos, int32_t t) { return std::find(eos.begin(), eos.end(), t) != eos.end(); }
}  // namespace

int32_t argmax(const float* row, int64_t n) {
  return int32_t(std::max_element(row, row + n) - row);  // first maximum, like np.argmax
}

void SpecStats::add(const SpecStats& o) {
  cycles += o.cycles; drafted += o.drafted; accepted += o.accepted; bonus += o.bonus;
  corrections += o.corrections; target_rows += o.target_rows; prefix_commits += o.prefix_commits;
  repairs += o.repairs; full_replays += o.full_replays;
  draft_s += o.draft_s; verify_s += o.verify_s; commit_s += o.commit_s;
}

namespace {
// The plain greedy loop of tests and benches drafts ungated; the engine resolves SPEC §2's
// DSpark gate per turn (resolve_dspark_confidence) into its SpecConfig.
SpecConfig greedy_config(int depth) {
  SpecConfig c;
  c.depth = depth;
  c.dspark_confidence = 0.0;
  return c;
}
}  // namespace

SpecDecoder::SpecDecoder(Model& model, int depth) : SpecDecoder(model, greedy_config(depth), nullptr) {}

SpecDecoder::SpecDecoder(Model& model, const SpecConfig& config, SpecDraws draws)
    : model_(model), head_(head_of(model)), cfg_(config), draws_(draws) {
  if (cfg_.depth < 1 || cfg_.depth > 16)
    throw InputError("speculative: depth must be 1..16, got " + std::to_string(cfg_.depth));
  const bool stochastic = cfg_.category == SpecCategory::kExact || cfg_.category == SpecCategory::kOpportunistic;
  if (cfg_.category == SpecCategory::kTargetOnly)
    throw InputError("speculative: category target_only has no speculative cycle");
  if (stochastic && !draws_.valid()) throw InputError("speculative: a stochastic category needs the sampler's generator");
  if (stochastic && !(cfg_.sampler.temperature > 0))
    throw InputError("speculative: category " + std::string(spec_category_name(cfg_.category)) +
                     " needs temperature > 0 (greedy turns use category greedy)");
}

void SpecDecoder::cycle(std::unique_ptr<ModelState>& state, int32_t next, int64_t budget, std::span<const int32_t> eos,
                        SpecCycle& out) {
  cycle(state, next, budget, [eos](int32_t t) { return is_eos(eos, t); }, out);
}

void SpecDecoder::cycle(std::unique_ptr<ModelState>& state, int32_t next, int64_t budget,
                        const std::function<bool(int32_t)>& is_stop, SpecCycle& out) {
  draft_window(*state, next, budget);
  // Verify: rows {D+1, vocab}; row k predicts the token after [next, d1..dk]. With capture
  // the window runs on the state itself (any prefix can be committed afterwards, and `next`
  // is always kept); without it, on a clone that is kept only when every row is.
  const auto t0 = Clock::now();
  std::unique_ptr<ModelState> trial;
  const bool captured = cfg_.capture_commit && head_.verify_capture(*state, row_tokens_, rows_);
  if (!captured) {
    trial = state->clone();
    model_.forward(*trial, row_tokens_, Logits::kAll, rows_);
  }
  walk_and_commit(state, captured ? nullptr : &trial, since(t0), budget, is_stop, out);
}

std::span<const int32_t> SpecDecoder::draft_window(ModelState& state, int32_t next, int64_t budget) {
  if (budget < 1) throw Error("speculative: cycle with no token budget");
  const int64_t V = model_.info().vocab_size;
  const bool exact = cfg_.category == SpecCategory::kExact;
  // Greedy keeps the full depth (it draws nothing; the budget only cuts the accepted list).
  const int depth = cfg_.category == SpecCategory::kGreedy ? cfg_.depth : int(std::min<int64_t>(cfg_.depth, budget));
  const auto t0 = Clock::now();
  // This turn's DSpark gate goes with each draft call (concurrent turns on the shared model
  // draft under their own gates: exact 0.8, others 0.6, or explicit values).
  const double gate = cfg_.dspark_confidence;
  if (exact) {
    q_.assign(size_t(depth) * size_t(V), 0.0);
    pick_k_ = 0;
    if (!head_.draft_picked(state, next, depth, [this](std::span<const float> row) { return pick_exact(row); },
                            drafts_)) {
      head_.draft_gated(state, next, depth, gate, drafts_);  // greedy-only head: point-mass proposal, no draw
      for (size_t k = 0; k < drafts_.size(); ++k) q_[k * size_t(V) + size_t(drafts_[k])] = 1.0;
    }
  } else {
    head_.draft_gated(state, next, depth, gate, drafts_);
  }
  if (corrupt_draft) corrupt_draft(drafts_);
  stats_.draft_s += since(t0);
  row_tokens_.assign(1, next);
  row_tokens_.insert(row_tokens_.end(), drafts_.begin(), drafts_.end());
  return row_tokens_;
}

void SpecDecoder::finish_captured(std::unique_ptr<ModelState>& state, std::span<const float> rows, double verify_s,
                                  int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out) {
  const size_t want = row_tokens_.size() * size_t(model_.info().vocab_size);
  if (row_tokens_.empty() || rows.size() != want)
    throw Error("speculative: finish_captured got " + std::to_string(rows.size()) + " logits for a window of " +
                std::to_string(row_tokens_.size()) + " rows");
  rows_.assign(rows.begin(), rows.end());
  walk_and_commit(state, nullptr, verify_s, budget, is_stop, out);
}

void SpecDecoder::walk_and_commit(std::unique_ptr<ModelState>& state, std::unique_ptr<ModelState>* trial,
                                  double verify_s, int64_t budget, const std::function<bool(int32_t)>& is_stop,
                                  SpecCycle& out) {
  const int64_t V = model_.info().vocab_size;
  stats_.verify_s += verify_s;
  stats_.cycles++;
  stats_.drafted += int64_t(drafts_.size());
  out.accepted.clear();
  out.bonus = -1;
  bool stop = false;
  switch (cfg_.category) {
    case SpecCategory::kExact: stop = walk_exact(budget, is_stop, out); break;
    case SpecCategory::kOpportunistic: stop = walk_opportunistic(budget, is_stop, out); break;
    default: stop = walk_greedy(budget, is_stop, out); break;
  }

  // Commit: tokens AR would have fed = [next, accepted...] minus the stop token.
  const auto t0 = Clock::now();
  const size_t feed = 1 + out.accepted.size() - (stop && !out.accepted.empty() ? 1 : 0);
  const int64_t last = int64_t(feed) - 1;  // verify row holding the logits after the fed tokens
  if (!trial) {
    head_.commit_prefix(*state, int64_t(feed));
    if (feed < row_tokens_.size()) stats_.prefix_commits++;
  } else {
    commit(state, *trial, feed);
  }
  out.logits.assign(rows_.begin() + last * V, rows_.begin() + (last + 1) * V);
  if (stop) out.bonus = -1;
  row_tokens_.clear();  // the window is spent: finish_captured needs a new draft_window
  stats_.commit_s += since(t0);
}

void SpecDecoder::commit(std::unique_ptr<ModelState>& state, std::unique_ptr<ModelState>& trial, size_t feed) {
  if (feed == row_tokens_.size()) {
    state = std::move(trial);  // every row kept: the verified clone is the committed state
    return;
  }
  stats_.repairs++;
  std::vector<float> unused;
  model_.forward(*state, std::span<const int32_t>(row_tokens_.data(), feed), Logits::kNone, unused);
}

bool SpecDecoder::walk_greedy(int64_t budget, const std::function<bool(int32_t)>& is_stop, SpecCycle& out) {
  const int64_t V = model_.info().vocab_size;
  const int D = int(drafts_.size());
  int i = 0;
  while (i < D && argmax(rows_.data() + int64_t(i) * V, V) == drafts_[size_t(i)]) ++i;
  stats_.accepted += i;
  // Where the caller's turn ends inside the accepted drafts (EOS kept, budget cap).
  bool stop = false;
  for (int k = 0; k < i && !stop; ++k) {
    if (int64_t(out.accepted.size()) >= budget) { stop = true; break; }
    out.accepted.push_back(drafts_[size_t(k)]);
    stop = is_stop(drafts_[size_t(k)]);
  }
  if (!stop && int64_t(out.accepted.size()) >= budget) stop = true;
  if (stop) return true;
  const size_t last = out.accepted.size();  // == i here
  out.bonus = argmax(rows_.data() + int64_t(last) * V, V);
  (i == D ? stats_.bonus : stats_.corrections)++;
  return false;
}

std::vector<int32_t> generate_greedy(Model& model, std::unique_ptr<ModelState>& state, std::vector<float> logits,
                                     int64_t max_tokens, std::span<const int32_t> eos, int depth,
                                     SpecStats* stats, std::function<void(std::vector<int32_t>&)> corrupt) {
  const int64_t V = model.info().vocab_size;
  std::vector<int32_t> out;
  if (max_tokens <= 0) return out;
  int32_t t = argmax(logits.data(), V);
  if (depth <= 0) {  // plain AR: the reference the speculative path must equal
    for (;;) {
      out.push_back(t);
      if (is_eos(eos, t) || int64_t(out.size()) >= max_tokens) return out;
      model.forward(*state, std::span<const int32_t>(&t, 1), Logits::kLast, logits);
      t = argmax(logits.data(), V);
    }
  }
  SpecDecoder spec(model, depth);
  spec.corrupt_draft = std::move(corrupt);
  SpecCycle c;
  for (;;) {
    out.push_back(t);
    if (is_eos(eos, t) || int64_t(out.size()) >= max_tokens) break;
    spec.cycle(state, t, max_tokens - int64_t(out.size()), eos, c);
    out.insert(out.end(), c.accepted.begin(), c.accepted.end());
    if (c.bonus < 0) break;
    t = c.bonus;
  }
  if (stats) stats->add(spec.stats());
  return out;
}

}  // namespace ds4::engine
