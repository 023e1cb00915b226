// Speculative decoding loop (greedy acceptance); see speculative.h for the cycle.
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
  repairs += o.repairs; full_replays += o.full_replays;
  draft_s += o.draft_s; verify_s += o.verify_s; commit_s += o.commit_s;
}

SpecDecoder::SpecDecoder(Model& model, int depth) : model_(model), head_(head_of(model)), depth_(depth) {
  if (depth < 1 || depth > 16) throw InputError("speculative: depth must be 1..16, got " + std::to_string(depth));
}

void SpecDecoder::cycle(std::unique_ptr<ModelState>& state, int32_t next, int64_t budget, std::span<const int32_t> eos,
                        SpecCycle& out) {
  cycle(state, next, budget, [eos](int32_t t) { return is_eos(eos, t); }, out);
}

void SpecDecoder::cycle(std::unique_ptr<ModelState>& state, int32_t next, int64_t budget,
                        const std::function<bool(int32_t)>& is_stop, SpecCycle& out) {
  const int64_t V = model_.info().vocab_size;
  auto t0 = Clock::now();
  head_.draft(*state, next, depth_, drafts_);
  if (corrupt_draft) corrupt_draft(drafts_);
  stats_.draft_s += since(t0);

  // Verify on a clone: rows {D+1, vocab}; row k predicts the token after [next, d1..dk].
  t0 = Clock::now();
  auto trial = state->clone();
  row_tokens_.assign(1, next);
  row_tokens_.insert(row_tokens_.end(), drafts_.begin(), drafts_.end());
  model_.forward(*trial, row_tokens_, Logits::kAll, rows_);
  stats_.verify_s += since(t0);

  const int D = int(drafts_.size());
  int i = 0;
  while (i < D && argmax(rows_.data() + int64_t(i) * V, V) == drafts_[size_t(i)]) ++i;
  stats_.cycles++;
  stats_.drafted += D;
  stats_.accepted += i;

  // Where the caller's turn ends inside the accepted drafts (EOS kept, budget cap).
  out.accepted.clear();
  bool stop = false;
  for (int k = 0; k < i && !stop; ++k) {
    if (int64_t(out.accepted.size()) >= budget) { stop = true; break; }
    out.accepted.push_back(drafts_[size_t(k)]);
    stop = is_stop(drafts_[size_t(k)]);
  }
  if (!stop && int64_t(out.accepted.size()) >= budget) stop = true;

  // Commit: tokens AR would have fed = [next, accepted...] minus the stop token.
  t0 = Clock::now();
  const size_t feed = 1 + out.accepted.size() - (stop && !out.accepted.empty() ? 1 : 0);
  const int64_t last = int64_t(feed) - 1;  // verify row holding the logits after the fed tokens
  if (feed == row_tokens_.size()) {
    state = std::move(trial);  // every draft accepted: the verified clone is the committed state
  } else {
    stats_.repairs++;
    std::vector<float> unused;
    model_.forward(*state, std::span<const int32_t>(row_tokens_.data(), feed), Logits::kNone, unused);
  }
  out.logits.assign(rows_.begin() + last * V, rows_.begin() + (last + 1) * V);
  out.bonus = stop ? -1 : argmax(out.logits.data(), V);
  if (!stop) stats_.bonus++;
  stats_.commit_s += since(t0);
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
