// The cost model's start-up measurement (spec_cost.h): on this model and backend, one AR
// decode forward, one verify forward of depth+1 rows and one draft of depth tokens, each
// the median of a few runs on a warm state of a few hundred tokens. A dozen forwards before
// the first request; nothing when speculation is off or the model has no draft head. Live
// AR steps and speculative cycles then move these costs (SpecCostModel::observe*).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "engine/engine.h"
#include "models/draft_head.h"

namespace ds4::engine {
namespace {
using Clock = std::chrono::steady_clock;

// Median seconds of `runs` calls of fn(), after one unmeasured call (caches, lazy buffers).
template <class Fn>
double median_s(int runs, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) t.push_back(fn());
  std::nth_element(t.begin(), t.begin() + long(t.size() / 2), t.end());
  return t[t.size() / 2];
}

template <class Fn>
double timed(Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

void Engine::measure_spec_cost() {
  DraftHead* head = model_->draft_head();
  // Measured even when the settings decide: /health then says what the model would choose.
  if (!head || spec_depth_ <= 0) return;
  try {
    const int k = spec_depth_;
    const int64_t vocab = model_->info().vocab_size;
    auto base = model_->new_state();
    head->enable_draft(*base);
    // A few hundred tokens of context: per-token costs at 16 tokens understate a chat's.
    std::vector<int32_t> prompt(size_t(std::clamp<int64_t>(context_size_ / 4, 16, 256)));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((int64_t(i) * 7919 + 13) % vocab);
    std::vector<float> logits;
    model_->forward(*base, prompt, Logits::kLast, logits);
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    std::vector<int32_t> drafts;
    constexpr int kRuns = 3;
    const double draft_s = median_s(kRuns, [&] { return timed([&] { head->draft(*base, next, k, drafts); }); });
    std::vector<int32_t> rows{next};
    rows.insert(rows.end(), drafts.begin(), drafts.end());
    rows.resize(size_t(k) + 1, next);  // a head that drafted fewer still costs depth+1 rows to verify
    std::vector<float> out;
    const double decode_s = median_s(kRuns, [&] {
      auto s = base->clone();
      return timed([&] { model_->forward(*s, std::span<const int32_t>(&next, 1), Logits::kLast, out); });
    });
    const double verify_s = median_s(kRuns, [&] {
      auto s = base->clone();
      return timed([&] {
        // The verify the loop runs: captured (recurrent families) or a plain all-rows forward.
        if (head->verify_capture(*s, rows, out)) head->commit_prefix(*s, int64_t(rows.size()));
        else model_->forward(*s, rows, Logits::kAll, out);
      });
    });
    spec_cost_.set_warmup(k, decode_s, verify_s, draft_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds4: warn: speculative cost model: warmup failed (%s); speculation stays on by default\n",
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "ds4: warn: speculative cost model: warmup failed; speculation stays on by default\n");
  }
}

Engine::SpecDefault Engine::speculation_default() const {
  SpecDefault d;
  d.inputs = spec_cost_.inputs();
  // The forwards this engine runs together (decode_batch / Engine::speculate decide the same way).
  const BatchedForwards batched{batching_ && model_->info().batched_decode, batching_ && model_->info().batched_verify};
  d.decision = spec_cost_.decision_at(decode_streams(), batched);
  if (spec_depth_ <= 0) {
    d.source = model_->draft_head() ? "settings" : "no draft head";
    return d;
  }
  if (spec_default_) {
    d.enabled = *spec_default_;
    d.source = "settings";
  } else if (spec_cost_.measured()) {
    d.enabled = d.decision.enabled;
    d.source = "cost model";
  } else {
    d.enabled = true;  // the measurement failed: the old default
    d.source = "cost model not measured";
  }
  return d;
}

}  // namespace ds4::engine
