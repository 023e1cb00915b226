// Continuous batching, the speculative side: every speculating session of the iteration
// drafts on its own (its draft head's chain, per sequence), then ONE Model::verify_batch
// verifies all their windows (each weight read once for all rows, every state capturing its
// own window), then each session walks its own rows and commits its kept prefix exactly as
// its cycle alone would (SpecDecoder::draft_window / finish_captured). Without a batching
// model (ModelInfo::batched_verify false) or with batching off, each cycle runs alone.
#include <chrono>

#include "engine/engine.h"
#include "core/error.h"
#include "engine/engine_job.h"

namespace ds4::engine {
namespace {

struct DraftedCycle {
  Engine::Job* job;
  int32_t next;     // the window's first token
  int64_t budget;   // SpecDecoder's budget for this cycle
  std::span<const int32_t> window;  // [next, drafts...], held by job->spec
};

}  // namespace

bool Engine::speculate(std::vector<Job*>& jobs, std::vector<Job*>& plain) {
  const bool together = batching_ && model_->info().batched_verify;
  std::vector<DraftedCycle> cycles;
  for (Job* j : jobs) {
    try {
      if (!together) {
        if (!spec_decode(*j)) plain.push_back(j);  // false: this turn never speculates
        continue;
      }
      if (!spec_ready(*j)) {
        plain.push_back(j);
        continue;
      }
      const int64_t budget = spec_budget(*j);
      if (budget < 1) {  // too close to the end: plain one-token forward (as spec_decode)
        feed_last(*j);
        continue;
      }
      cycles.push_back({j, j->to_feed, budget, j->spec->draft_window(*j->state, j->to_feed, budget)});
    } catch (const std::exception& e) {
      fail(*j, e.what());
    }
  }
  if (cycles.empty()) return false;

  std::vector<ModelState*> states;
  std::vector<std::span<const int32_t>> windows;
  for (const DraftedCycle& c : cycles) {
    states.push_back(c.job->state.get());
    windows.push_back(c.window);
  }
  std::vector<float>& rows = batch_rows_;  // verify_batch clears it: no allocation once grown
  const size_t V = size_t(model_->info().vocab_size);
  size_t window_rows = 0;
  for (const DraftedCycle& c : cycles) window_rows += c.window.size();
  const auto t0 = Clock::now();
  try {
    if (!model_->verify_batch(states, windows, rows))
      throw Error("speculative: the model's draft head cannot capture a batched verify");
    if (rows.size() != window_rows * V)  // a short result would be read past its end below
      throw Error("speculative: verify_batch returned " + std::to_string(rows.size()) + " floats for " +
                  std::to_string(window_rows) + " rows of " + std::to_string(V));
  } catch (const std::exception& e) {
    // Model::verify_batch's throw contract: every state of the batch is unspecified (advanced,
    // part way, or holding a captured window): every cycle's turn ends, its state unpublished.
    for (const DraftedCycle& c : cycles) fail(*c.job, e.what());
    return true;
  }
  // Each cycle's share of the batch's time (its stats feed the speculation cost model).
  const double batch_s = seconds(t0, Clock::now());
  const double share = batch_s / double(cycles.size());
  spec_cost_.observe_rows(int64_t(window_rows), batch_s);  // the load-aware decision's verify side
  {
    std::lock_guard lk(metrics_mu_);
    m_.batched_verify_calls++;
    m_.batched_verify_rows += rows.size() / V;
  }
  size_t r0 = 0;
  for (const DraftedCycle& c : cycles) {
    Job& j = *c.job;
    const std::span<const float> mine(rows.data() + r0 * V, c.window.size() * V);
    r0 += c.window.size();
    try {
      SpecCycle out;
      j.spec->finish_captured(j.state, mine, share, c.budget, [this](int32_t t) { return codec_->is_stop_token(t); },
                              out);
      spec_emit(j, c.next, out);
    } catch (const std::exception& e) {
      fail(j, e.what());
    }
  }
  return true;
}

}  // namespace ds4::engine
