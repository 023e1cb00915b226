// Engine hook for speculative decoding: one SpecDecoder cycle replaces the single-token
// forward of decode_batch, then the accepted drafts are emitted like sampled tokens and the
// cycle's next token (bonus or correction) waits in job.spec_next for the next step. Kept
// apart from engine.cpp so the step loop stays one-token simple.
#include "engine/engine.h"
#include "engine/engine_job.h"
#include "models/draft_head.h"

namespace ds4::engine {
namespace {

// The turn's category (SPEC.md §2, resolved per turn). Sampled turns continue the turn's own
// sampler stream (SpecDraws: MTPLX's PCG64 for Qwen, ds4's xorshift64* for GLM / DeepSeek).
SpecCategory turn_category(const Sampler& sampler, const std::string& stochastic) {
  if (sampler.params().temperature <= 0) return SpecCategory::kGreedy;
  return resolve_spec_category(true, sampler.params(), parse_spec_category(stochastic));
}

void report(const SpecDecoder& spec, Usage& u) {
  const SpecStats& s = spec.stats();
  u.spec_mode = spec_category_name(spec.category());
  u.spec_depth = spec.config().depth;
  u.spec_dspark_confidence = spec.config().dspark_confidence;
  u.spec_drafted = s.drafted, u.spec_accepted = s.accepted, u.spec_bonus = s.bonus;
  u.spec_corrections = s.corrections, u.spec_prefix_commits = s.prefix_commits;
  u.spec_repairs = s.repairs, u.spec_full_replays = s.full_replays;
  u.spec_draft_s = s.draft_s, u.spec_verify_s = s.verify_s, u.spec_commit_s = s.commit_s;
}

}  // namespace

bool Engine::spec_ready(Job& job) {
  if (!job.spec) {
    // Decided once, at the turn's first decode step.
    if (job.spec_declined || (!job.spec_requested && !speculate_by_default())) {
      job.spec_declined = true;
      return false;
    }
    const SpecCategory cat = turn_category(*job.sampler, spec_sampling_);
    if (cat == SpecCategory::kTargetOnly) return false;
    SpecConfig cfg;
    cfg.depth = job.spec_depth;
    cfg.category = cat;
    cfg.sampler = job.sampler->params();
    cfg.dspark_confidence = resolve_dspark_confidence(dspark_confidence_, cat);
    cfg.sampler_kind = job.sampler->kind();
    job.spec = std::make_unique<SpecDecoder>(*model_, cfg, SpecDraws::of(*job.sampler));
  }
  return true;
}

// The turn's remaining tokens, and room so that the context check of emit_token cannot fire
// inside the cycle (it then fires on the same token as AR, on a later step).
int64_t Engine::spec_budget(const Job& job) const {
  return std::min(job.req.max_tokens - job.usage.completion_tokens,
                  context_size_ - int64_t(job.history.size()) - 3 - job.spec_depth);
}

bool Engine::spec_decode(Job& job) {
  if (!spec_ready(job)) return false;
  const int32_t next = job.to_feed;
  const int64_t budget = spec_budget(job);
  if (budget < 1) {  // too close to the end: plain one-token forward
    feed_last(job);
    return true;
  }
  SpecCycle c;
  job.spec->cycle(job.state, next, budget, [this](int32_t t) { return codec_->is_stop_token(t); }, c);
  spec_emit(job, next, c);
  return true;
}

void Engine::feed_last(Job& job) {
  const int32_t t = job.to_feed;
  model_->forward(*job.state, std::span<const int32_t>(&t, 1), Logits::kLast, job.logits);
  job.history.push_back(t);
  job.to_feed = -1;
}

void Engine::spec_emit(Job& job, int32_t next, SpecCycle& c) {
  // The state now holds next + the accepted drafts, minus the last one when the turn stops
  // on it (EOS / max_tokens: that one is fed by finish(), as in AR). History follows the
  // state first, so a stop string matched on a fed draft still publishes a consistent pair.
  const size_t fed = c.bonus < 0 ? c.accepted.size() - 1 : c.accepted.size();
  job.history.push_back(next);
  job.history.insert(job.history.end(), c.accepted.begin(), c.accepted.begin() + int64_t(fed));
  job.logits = std::move(c.logits);
  job.to_feed = -1;
  report(*job.spec, job.usage);
  for (size_t k = 0; k < c.accepted.size() && job.phase != Job::Phase::kDone; ++k)
    emit_token(job, c.accepted[k], k < fed);
  if (job.phase == Job::Phase::kDone) return;
  if (c.bonus >= 0) {
    job.spec_next = c.bonus;  // emitted (and later fed) by the next step, never re-sampled
    return;
  }
  // A cycle cut by the context room (not by the turn's end) leaves its last draft emitted
  // but unfed: feed it now so the next step samples from fresh logits.
  if (job.to_feed >= 0) feed_last(job);
}

}  // namespace ds4::engine
