// Continuous batching, the decode side: the plain decode steps of one iteration as one
// Model::decode_batch_candidates call (each weight read once for all sequences), every
// session's draw from its own row's candidates exactly as a single step draws it
// (forward_and_sample), from the whole row where they cannot decide it.
#include <optional>

#include "engine/engine.h"
#include "engine/engine_job.h"

namespace ds4::engine {

void Engine::decode_together(std::vector<Job*>& jobs) {
  std::vector<ModelState*> states;
  std::vector<int32_t> tokens;
  std::vector<CandidateRequest> reqs;
  for (Job* j : jobs) {
    states.push_back(j->state.get());
    tokens.push_back(j->to_feed);
    reqs.push_back(candidate_request(*j));
  }
  std::vector<float>& rows = batch_rows_;  // the model resizes it: no allocation once grown
  std::vector<std::optional<int32_t>> drawn(jobs.size());
  const auto t0 = Clock::now();
  try {
    // Each row's draw from its candidates (decode_one's, in the same order); the model hands
    // back a row only where they cannot decide it (a CUDA model then copies only that row).
    model_->decode_batch_candidates(states, tokens, reqs, batch_cands_, rows, [&](size_t i, const SampleCandidates& c) {
      drawn[i] = jobs[i]->sampler->sample_from(c);
      return !drawn[i].has_value();
    });
  } catch (const std::exception& e) {
    // Model::decode_batch's throw contract: every state of the batch is unspecified (earlier
    // forwards advanced, the throwing one part way), so none of these turns can go on; their
    // states go with their jobs (never published), not only the throwing forward's.
    for (Job* j : jobs) fail(*j, e.what());
    return;
  }
  // The batched step's time by its rows: the AR side of the load-aware speculation decision
  // (spec_cost.h). Not observe_decode: that is one stream's step alone.
  const double took = seconds(t0, Clock::now());
  if (spec_depth_ > 0) spec_cost_.observe_rows(int64_t(jobs.size()), took);
  {
    std::lock_guard lk(metrics_mu_);
    m_.batched_decode_seconds += took;
    m_.batched_calls++;
    m_.batched_rows += jobs.size();
  }
  const size_t V = size_t(model_->info().vocab_size);
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& j = *jobs[i];
    const bool from_candidates = reqs[i].k > 0 && drawn[i].has_value();
    // The row (when the model handed it back) stays with the turn as a single step leaves it;
    // a draw from the candidates leaves none (a cached state with empty logits is continued by
    // feeding a token, never sampled from).
    if (from_candidates) j.logits.clear();
    else j.logits.assign(rows.begin() + long(i * V), rows.begin() + long((i + 1) * V));
    if (reqs[i].k > 0) {
      j.sampled_next = from_candidates ? *drawn[i] : j.sampler->sample(j.logits);
      count_draw(j, !from_candidates);
    }
    j.history.push_back(j.to_feed);
    j.to_feed = -1;
  }
}

}  // namespace ds4::engine
