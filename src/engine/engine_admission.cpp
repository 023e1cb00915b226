// Admission control and preemption (issue #24; the arithmetic is state_budget.h). The live
// sessions' model states and the prefix cache share one byte budget:
//  - a queued turn starts only when its projected state (prompt + max_tokens, bounded by the
//    context) fits beside what the live states hold now; cache entries are evicted, least
//    recently used first, to make room; otherwise it waits at the head of the queue (FIFO);
//  - before an iteration feeds anything, the bytes every live state will hold after it are
//    checked against the budget: cache entries go first, then the youngest live turn is
//    preempted by recompute (its state is dropped, its tokens kept, it goes back to the
//    front of the queue; admitted again, it re-feeds its prompt and emitted tokens, through
//    the prefix cache where an entry helps, and carries on with its own sampler, so the
//    stream neither repeats nor skips a token). The oldest live turn is never preempted:
//    its projected need fit the whole budget when it was admitted.
//  - with EngineOptions::preempt_swap the preempted state is swapped to host instead: its
//    sections (ModelState::save) wait with the turn, and admitted again a fresh state loads
//    them and the turn goes on from where it stopped (nothing re-fed; the sections are the
//    exact state, the checkpoint format). Recompute remains the fallback: sections beyond
//    the swap budget, a save or load that fails.
// A turn whose projected state exceeds the whole budget is refused at submit (CapacityError).
#include <algorithm>

#include "engine/engine.h"
#include "engine/engine_job.h"
#include "models/draft_head.h"

namespace ds4::engine {

size_t Engine::need(const Job& job) const {
  return budget_->need(int64_t(job.prompt.size()), job.req.max_tokens);
}

// Proportional shares (ModelState::proportional_bytes): turns continuing one cached prefix,
// and the cache entry itself, each count a part of its blocks, so the prefix counts once.
size_t Engine::held(const Job& job) const {
  size_t b = job.state ? job.state->proportional_bytes() : 0;
  if (job.pre_stop && job.pre_stop->state) b += job.pre_stop->state->proportional_bytes();
  return b;
}

// Under mu_ (admit): live_ only changes on the engine thread, which is the caller.
bool Engine::fits(const Job& queued) {
  size_t used = 0;
  bool unstarted = false;
  // A turn admitted but not started yet holds nothing so far: reserve its projected need.
  for (const auto& j : live_) {
    unstarted |= j->phase == Job::Phase::kNew;
    used += j->phase == Job::Phase::kNew ? need(*j) : held(*j);
  }
  const size_t want = used + need(queued);
  if (want > budget_->bytes()) return false;
  // An admitted turn that has not started may be about to continue a cached prefix: evicting
  // the cache for another turn would take that away, so the other waits (an iteration) instead.
  const size_t room = budget_->bytes() - want;
  return (unstarted ? cache_.share_bytes() : cache_.fit_share(room)) <= room;
}

void Engine::preempt_to_fit(std::vector<Job*>& decode, std::vector<Job*>& prefill) {
  // What each live state holds once this iteration has fed it: a decode step feeds its
  // token (and a speculative cycle its drafts), a prefill slice at most a chunk.
  auto after = [&](const Job& j) -> size_t {
    if (!j.state || j.phase == Job::Phase::kDone) return 0;
    const int64_t pos = j.state->position();
    size_t b = held(j);
    if (j.phase == Job::Phase::kDecode && j.to_feed >= 0) b += budget_->growth(pos, 1 + j.spec_depth);
    if (j.phase == Job::Phase::kPrefill)
      b += budget_->growth(pos, std::min<int64_t>(int64_t(j.pending.size() - j.pending_at), prefill_chunk_));
    return b;
  };
  for (;;) {
    size_t total = 0;
    for (const auto& j : live_) total += after(*j);
    if (total <= budget_->bytes()) {
      cache_.fit_share(budget_->bytes() - total);
      return;
    }
    cache_.evict_to(0);
    // The youngest turn holding a state, never the only one.
    Job* victim = nullptr;
    int holding = 0;
    for (const auto& j : live_)
      if (j->state && j->phase != Job::Phase::kDone) holding++, victim = j.get();
    if (holding <= 1) return;  // the oldest runs on (its need fit the whole budget)
    std::erase(decode, victim);
    std::erase(prefill, victim);
    preempt(*victim);
  }
}

void Engine::to_replay(Job& job) {
  // Every token the state holds, the emitted token it has not consumed yet, and the prompt
  // tokens it has not been fed: re-fed in this order they rebuild the same state (prefill
  // slices of any size give the decode steps' state bit for bit).
  std::vector<int32_t> replay = std::move(job.history);
  if (job.to_feed >= 0) replay.push_back(job.to_feed);
  if (job.phase == Job::Phase::kPrefill)
    replay.insert(replay.end(), job.pending.begin() + long(job.pending_at), job.pending.end());
  job.pending = std::move(replay);
  job.pending_at = 0;
  job.history.clear();
  job.to_feed = -1;
  job.logits.clear();
}

size_t Engine::swapped_bytes() const {
  std::lock_guard lk(mu_);
  size_t b = 0;
  for (const auto& j : queue_) b += j->swapped_bytes;
  return b;
}

bool Engine::swap_out(Job& job) {
  if (!preempt_swap_ || !job.state) return false;
  std::vector<StateSection> sections;
  try {
    job.state->save(sections);  // a CUDA state: its device caches copied to host memory
  } catch (const std::exception&) {
    return false;  // e.g. a state the model cannot save now: recompute instead
  }
  size_t b = 0;
  for (const StateSection& s : sections) b += s.bytes.size() + s.name.size();
  if (swapped_bytes() + b > swap_budget_) return false;
  job.swapped = std::move(sections);
  job.swapped_bytes = b;
  job.swapped_phase = job.phase;
  return true;
}

void Engine::preempt(Job& job) {
  const bool swapped = swap_out(job);
  if (!swapped) to_replay(job);
  job.state.reset();
  job.pre_stop.reset();  // publish_pre_stop rebuilds it from the cache when it is needed
  job.phase = Job::Phase::kNew;
  job.resumed = true;
  job.usage.preemptions++;
  std::unique_ptr<Job> owned;
  for (auto& j : live_)
    if (j.get() == &job) owned = std::move(j);
  std::erase(live_, nullptr);
  {
    std::lock_guard lk(mu_);
    queue_.push_front(std::move(owned));
  }
  std::lock_guard lk(metrics_mu_);
  m_.preemptions++;
  if (swapped) m_.swap_outs++;
}

bool Engine::resume(Job& job) {
  if (!job.resumed) return false;
  if (!job.swapped.empty()) {
    std::vector<StateSection> sections = std::move(job.swapped);
    job.swapped.clear();
    job.swapped_bytes = 0;
    try {
      auto st = model_->new_state();
      st->load(sections);  // the exact state it left (checkpoint sections)
      job.state = std::move(st);
      job.phase = job.swapped_phase;
      return true;
    } catch (const std::exception&) {
      job.phase = job.swapped_phase;  // the tokens are all there: recompute them instead
      to_replay(job);
      job.phase = Job::Phase::kNew;
    }
  }
  const std::vector<int32_t>& want = job.pending;
  auto hit = cache_.lookup([&](const std::vector<int32_t>& t) -> std::optional<std::vector<int32_t>> {
    if (t.size() > want.size() || !std::equal(t.begin(), t.end(), want.begin())) return std::nullopt;
    return std::vector<int32_t>(want.begin() + long(t.size()), want.end());
  });
  if (hit) {
    job.state = std::move(hit->state);
    job.history = std::move(hit->tokens);
    job.logits = std::move(hit->logits);
    job.pending = std::move(hit->append);
  } else {
    job.state = model_->new_state();
    if (spec_depth_ > 0) model_->draft_head()->enable_draft(*job.state);
  }
  job.pending_at = 0;
  job.phase = job.pending.empty() ? Job::Phase::kDecode : Job::Phase::kPrefill;
  return true;
}

void Engine::publish_state_bytes() {
  size_t b = 0;
  for (const auto& j : live_) b += held(*j);
  const size_t swapped = swapped_bytes();
  std::lock_guard lk(metrics_mu_);
  m_.state_bytes = b;
  m_.swapped_bytes = swapped;
}

}  // namespace ds4::engine
