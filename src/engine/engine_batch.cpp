// Continuous batching, the decode side: the plain decode steps of one iteration as one
// Model::decode_batch call (each weight read once for all sequences), then every session's
// draw from its own row exactly as a single step draws it (decode_one / forward_and_sample
// with the host candidates of Model::forward_candidates' default).
#include "engine/engine.h"
#include "engine/engine_job.h"

namespace ds4::engine {

void Engine::decode_together(std::vector<Job*>& jobs) {
  std::vector<ModelState*> states;
  std::vector<int32_t> tokens;
  for (Job* j : jobs) {
    states.push_back(j->state.get());
    tokens.push_back(j->to_feed);
  }
  std::vector<float>& rows = batch_rows_;  // the model resizes it: no allocation once grown
  const auto t0 = Clock::now();
  try {
    model_->decode_batch(states, tokens, rows);
  } catch (const std::exception& e) {
    // Model::decode_batch's throw contract: every state of the batch is unspecified (earlier
    // forwards advanced, the throwing one part way), so none of these turns can go on; their
    // states go with their jobs (never published), not only the throwing forward's.
    for (Job* j : jobs) fail(*j, e.what());
    return;
  }
  // The batched step's time by its rows: the AR side of the load-aware speculation decision
  // (spec_cost.h). Not observe_decode: that is one stream's step alone.
  if (spec_depth_ > 0) spec_cost_.observe_rows(int64_t(jobs.size()), seconds(t0, Clock::now()));
  {
    std::lock_guard lk(metrics_mu_);
    m_.batched_calls++;
    m_.batched_rows += jobs.size();
  }
  const size_t V = size_t(model_->info().vocab_size);
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& j = *jobs[i];
    j.logits.assign(rows.begin() + long(i * V), rows.begin() + long((i + 1) * V));
    const CandidateRequest req = candidate_request(j);
    if (req.k > 0) {  // the draw decode_one makes on a CPU model's row, in the same order
      SampleCandidates c;
      top_candidates(j.logits, req, c);
      std::optional<int32_t> tok = j.sampler->sample_from(c);
      const bool fallback = !tok.has_value();
      if (fallback) tok = j.sampler->sample(j.logits);
      j.sampled_next = *tok;
      count_draw(j, fallback);
    }
    j.history.push_back(j.to_feed);
    j.to_feed = -1;
  }
}

}  // namespace ds4::engine
