#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <utility>

#include "core/capacity_error.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "engine/engine_job.h"
#include "engine/session_checkpoints.h"
#include "engine/turn_boundary.h"

namespace ds4::engine {

Engine::Engine(std::unique_ptr<Model> model, std::unique_ptr<Codec> codec, EngineOptions o)
    : model_(std::move(model)),
      codec_(std::move(codec)),
      sampler_kind_(sampler_kind_for_family(model_->info().family)),
      context_size_(o.context_size > 0 ? o.context_size : model_->info().max_context),
      prefill_chunk_(o.prefill_chunk > 0 ? o.prefill_chunk : model_->info().default_prefill_chunk),
      max_live_(std::max(1, o.max_live)),
      snapshot_prompt_(o.snapshot_prompt),
      cache_(o.cache_bytes) {
  if (model_->info().max_context > 0 && context_size_ > model_->info().max_context)
    throw InputError("context_size " + std::to_string(context_size_) + " exceeds the model's " +
                     std::to_string(model_->info().max_context));
  if (prefill_chunk_ <= 0) prefill_chunk_ = 2048;
  if (o.snapshot_every >= 0) {
    // Whole chunks: a snapshot can only be taken where a chunk ends.
    const int64_t every = o.snapshot_every > 0 ? o.snapshot_every : 4096;
    snapshot_every_ = (every + prefill_chunk_ - 1) / prefill_chunk_ * prefill_chunk_;
  }
  spec_depth_ = model_->draft_head() ? o.spec_depth : 0;
  spec_default_ = o.spec_default;
  parse_spec_category(o.spec_sampling);  // rejects a bad name at construction
  spec_sampling_ = o.spec_sampling;
  dspark_confidence_ = o.dspark_confidence;
  sample_candidates_ = o.sample_candidates;
  if (o.sample_candidates_k < 1 || o.sample_candidates_k > 1024)
    throw InputError("sample_candidates_k " + std::to_string(o.sample_candidates_k) + " must be in [1, 1024]");
  sample_candidates_k_ = o.sample_candidates_k;
  batching_ = o.batching;
  if (o.step_tokens < 0) throw InputError("step_tokens must be >= 0 (0 = auto), got " + std::to_string(o.step_tokens));
  scheduler_.emplace(batching_ ? (o.step_tokens > 0 ? o.step_tokens : prefill_chunk_) : 0, prefill_chunk_);
  m_.step_tokens = scheduler_->step_tokens();
  state_memory_request_ = o.state_memory_bytes;
  preempt_swap_ = o.preempt_swap;
  swap_budget_ = o.swap_bytes ? o.swap_bytes : host_memory_available() / 2;
  if (!o.checkpoint_dir.empty())
    checkpoints_ = std::make_unique<SessionCheckpoints>(*model_, o.checkpoint_dir, o.checkpoint_budget_bytes,
                                                        /*draft_state=*/spec_depth_ > 0);
  canary_ = std::move(o.canary);
  if (canary_) canary_->start();
  // The cost model's warmup runs on the engine thread (a GPU model's buffers live there)
  // before any request; the engine is ready when it is done.
  // (The promise is shared: the constructor may return while set_value is still running.)
  auto warm = std::make_shared<std::promise<void>>();
  auto ready = warm->get_future();
  auto budget_error = std::make_shared<std::string>();
  thread_ = std::thread([this, warm, budget_error] {
    // The state budget is measured here too (a CUDA model's probe state lives on this thread).
    try {
      const size_t available = model_->state_memory_available();
      budget_.emplace(state_memory_request_, available, model_->state_cost(spec_depth_ > 0), context_size_);
      cache_.set_max_bytes(std::min(cache_.max_bytes(), budget_->bytes()));
    } catch (const std::exception& e) {
      *budget_error = e.what();
      warm->set_value();
      return;
    }
    measure_spec_cost();  // never throws
    warm->set_value();
    run();
  });
  ready.wait();
  if (!budget_error->empty()) {
    thread_.join();
    if (canary_) canary_->stop();
    throw Error("engine: measuring the model's state cost failed: " + *budget_error);
  }
  {
    std::lock_guard lk(metrics_mu_);
    m_.state_budget_bytes = budget_->bytes();
    m_.swap_budget_bytes = preempt_swap_ ? swap_budget_ : 0;
  }
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    std::lock_guard lk(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (canary_) canary_->stop();
}

std::vector<int32_t> Engine::prompt_tokens(const GenRequest& req) const {
  if (req.raw_prompt) return codec_->encode(*req.raw_prompt);
  return codec_->render(req.conv);
}

int64_t Engine::count_tokens(const GenRequest& req) const { return int64_t(prompt_tokens(req).size()); }

std::shared_ptr<RequestHandle> Engine::submit(GenRequest req) {
  validate_sampler_params(sampler_kind_, req.sampler);
  if (req.max_tokens < 1) throw InputError("max_tokens must be >= 1, got " + std::to_string(req.max_tokens));
  auto job = std::make_unique<Job>();
  job->prompt = prompt_tokens(req);
  if (job->prompt.empty()) throw InputError("the prompt is empty");
  if (int64_t(job->prompt.size()) >= context_size_)
    throw InputError("prompt has " + std::to_string(job->prompt.size()) + " tokens; the context holds " +
                     std::to_string(context_size_) + " (at least one must be left to generate)");
  // Only where the re-render of this turn cannot match what it generates: a prompt that
  // opens a reasoning block the client will not send back. Elsewhere the turn-end state
  // (with its alias) is reused and a boundary snapshot would only cost memory and disk.
  if (!req.raw_prompt && codec_->starts_in_reasoning(req.conv))
    job->turn_start = turn_boundary(*codec_, req.conv, job->prompt);
  // Speculation per request: off on request, or at another depth; on only where the server
  // runs its draft head (the states carry the head's history only then).
  job->spec_depth = spec_depth_;
  if (req.spec_depth && (*req.spec_depth < 1 || *req.spec_depth > 5))
    throw InputError("speculative.depth must be in 1..5, got " + std::to_string(*req.spec_depth));
  if (req.spec_enabled.value_or(true) && spec_depth_ == 0 && (req.spec_enabled || req.spec_depth))
    throw InputError(std::string("speculative: this server does not speculate (") +
                     (model_->draft_head() ? "started with speculative.enabled false" : "the model has no draft head") +
                     "); only speculative.enabled false is accepted");
  if (req.spec_enabled == false) {
    if (job->spec_depth > 0) job->usage.spec_off_reason = "request";
    job->spec_depth = 0;
  } else if (req.spec_enabled || req.spec_depth) {
    // Asked for by the request: speculates whatever the cost model's default says.
    job->spec_requested = true;
    if (req.spec_depth) job->spec_depth = *req.spec_depth;
  }
  if (req.tool_choice.constrains() && !req.raw_prompt) {
    job->constraint = codec_->tool_constraint(req.conv, req.tool_choice);
    if (!job->constraint)
      throw InputError(std::string("tool_choice '") + tok::tool_choice_name(req.tool_choice.mode) +
                       "' needs constrained decoding, which this model's codec does not have");
    // Drafts are not checked against the grammar: constrained turns decode target-only.
    if (job->spec_depth > 0) job->usage.spec_off_reason = "constrained";
    job->spec_depth = 0;
  }
  job->req = std::move(req);
  if (const size_t needed = need(*job); needed > budget_->bytes())
    throw CapacityError("the request's model state would need " + std::to_string(needed) + " bytes (" +
                        std::to_string(job->prompt.size()) + " prompt tokens + max_tokens " +
                        std::to_string(job->req.max_tokens) + ") but the engine's state memory budget is " +
                        std::to_string(budget_->bytes()) + " bytes (batching.state_memory_mib); ask for fewer tokens");
  job->handle = std::make_shared<RequestHandle>();
  job->t_submit = Clock::now();
  auto handle = job->handle;
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw Error("the engine is shutting down");
    queue_.push_back(std::move(job));
  }
  {
    std::lock_guard lk(metrics_mu_);
    m_.requests_total++;
  }
  cv_.notify_all();
  return handle;
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m;
  {
    std::lock_guard lk(metrics_mu_);
    m = m_;
  }
  {
    std::lock_guard lk(mu_);
    m.queue_depth = int64_t(queue_.size());
  }
  m.cache_bytes = cache_.bytes();
  m.cache_entries = cache_.entries();
  m.cache_evictions = cache_.evictions();
  if (checkpoints_) m.checkpoints = checkpoints_->stats();
  if (canary_) m.canary = canary_->totals();
  return m;
}

// Moves queued jobs into the live set; false once stopping and nothing is left.
bool Engine::admit() {
  std::unique_lock lk(mu_);
  // The GPU canary probes only while there is work (SPEC §6: "during inference").
  if (canary_ && queue_.empty() && live_.empty()) canary_->set_active(false);
  cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || !live_.empty(); });
  if (canary_) canary_->set_active(true);
  if (stopping_) {
    for (auto& j : queue_) live_.push_back(std::move(j));
    queue_.clear();
    for (auto& j : live_) j->handle->cancel();
    return !live_.empty();
  }
  // Admission control (engine_admission.cpp): the head of the queue waits until its state
  // fits; the ones behind it wait too (first come, first served).
  while (!queue_.empty() && int(live_.size()) < max_live_ && fits(*queue_.front())) {
    live_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return true;
}

void Engine::run() {
  while (admit()) iterate();
}

// One iteration: cancels, starts and decode draws first (every decoding session steps), then
// the prefill slices the budget allows (sessions started just now included), then the
// decode forwards of the iteration together. Finished sessions leave at its end; admit()
// lets queued ones join before the next.
void Engine::iterate() {
  const auto t0 = Clock::now();
  std::vector<Job*> decode, prefill;
  int64_t decode_tokens = 0;
  for (auto& j : live_) {
    try {
      step(*j);
      if (j->phase == Job::Phase::kDecode && j->to_feed >= 0) decode.push_back(j.get());
      if (j->phase == Job::Phase::kPrefill) prefill.push_back(j.get());
    } catch (const std::exception& e) {
      fail(*j, e.what());
    }
  }
  preempt_to_fit(decode, prefill);
  // after preemption: a preempted turn feeds nothing this iteration
  for (const Job* j : decode) decode_tokens += 1 + j->spec_depth;  // a speculative cycle feeds its drafts too
  std::vector<int64_t> pending;
  for (Job* j : prefill) pending.push_back(int64_t(j->pending.size() - j->pending_at));
  const std::vector<int64_t> grant = scheduler_->grant(decode_tokens, pending);
  std::vector<Job*> fed_jobs;
  std::vector<int64_t> fed_grants;
  for (size_t i = 0; i < prefill.size(); ++i)
    if (grant[i] > 0) fed_jobs.push_back(prefill[i]), fed_grants.push_back(grant[i]);
  const int64_t fed = int64_t(fed_jobs.size());
  prefill_slices(fed_jobs, fed_grants);
  decode_batch(decode);
  check_canary();
  std::erase_if(live_, [](const auto& j) { return j->phase == Job::Phase::kDone; });
  // Idle until the next turn: hold no rows (a run can end inside a batched iteration, e.g. a
  // speculative cycle's accepted drafts reaching max_tokens, which decode_batch keeps).
  if (live_.empty()) {
    std::vector<float>().swap(batch_rows_);
    std::vector<SampleCandidates>().swap(batch_cands_);
  }
  publish_state_bytes();
  std::lock_guard lk(metrics_mu_);
  m_.live = int64_t(live_.size());
  m_.batch_rows_bytes = batch_rows_.capacity() * sizeof(float);
  m_.running = int64_t(decode.size());
  m_.prefilling = fed;
  if (!decode.empty()) {
    size_t b = 0;
    while (b < std::size(EngineMetrics::kBatchBounds) && int64_t(decode.size()) > EngineMetrics::kBatchBounds[b]) ++b;
    m_.decode_steps_by_size[b]++;
    m_.decode_iterations++;
    m_.decode_sequences += decode.size();
    m_.iteration_seconds += seconds(t0, Clock::now());
  }
}

void Engine::step(Job& job) {
  if (job.phase != Job::Phase::kDone && job.handle->cancelled()) return finish(job, Finish::kCancelled);
  if (canary_ && !job.canary_mark) job.canary_mark = canary_->mark();
  switch (job.phase) {
    case Job::Phase::kNew: start(job); break;
    case Job::Phase::kPrefill: break;  // fed by iterate() under the token budget
    case Job::Phase::kDecode: {
      if (job.constraint) return constrained_step(job);
      // A speculative cycle already chose the next token (bonus / correction, drawn from
      // the sampler's stream in the walk's order): emit it instead of sampling again.
      const int32_t tok = job.spec_next >= 0      ? std::exchange(job.spec_next, -1)
                          : job.sampled_next >= 0 ? std::exchange(job.sampled_next, -1)
                                                  : job.sampler->sample(job.logits);
      emit_token(job, tok);
      break;
    }
    case Job::Phase::kDone: break;
  }
}

// One draw under the turn's constraint: the sampler sees the row with every token that would
// leave the grammar at -inf (the same sampler and RNG stream, so a seeded turn is
// reproducible), and the drawn token advances the constraint.
void Engine::constrained_step(Job& job) {
  std::vector<float> row = job.logits;
  if (job.constraint->mask(row) == 0) {
    job.handle->push(error_event("constrained decoding reached a dead end: no token continues the tool call"));
    return finish(job, Finish::kError);
  }
  const int32_t tok = job.sampler->sample(row);
  if (!job.constraint->accept(tok)) {
    job.handle->push(error_event("constrained decoding drew token " + std::to_string(tok) + ", which the grammar refuses"));
    return finish(job, Finish::kError);
  }
  job.usage.constrained_steps++;
  emit_token(job, tok);
}

void Engine::start(Job& job) {
  if (resume(job)) return;  // a preempted turn (engine_admission.cpp)
  std::optional<PrefixCache::Hit> hit;
  if (job.restore) {
    // A checkpoint read is in flight (session_checkpoints.h): its memory lookup already missed.
  } else if (job.req.raw_prompt) {
    job.t_prefill = Clock::now();
    job.usage.queue_s = seconds(job.t_submit, job.t_prefill);
    hit = cache_.lookup([&](const std::vector<int32_t>& t) -> std::optional<std::vector<int32_t>> {
      if (t.size() > job.prompt.size() || !std::equal(t.begin(), t.end(), job.prompt.begin())) return std::nullopt;
      return std::vector<int32_t>(job.prompt.begin() + t.size(), job.prompt.end());
    });
  } else {
    job.t_prefill = Clock::now();
    job.usage.queue_s = seconds(job.t_submit, job.t_prefill);
    hit = cache_.lookup([&](const std::vector<int32_t>& t) -> std::optional<std::vector<int32_t>> {
      // job.prompt is the render of this conversation: a cached exact token prefix of it
      // (a chunk snapshot, an earlier turn) continues without asking the template.
      if (t.size() < job.prompt.size() && std::equal(t.begin(), t.end(), job.prompt.begin()))
        return std::vector<int32_t>(job.prompt.begin() + long(t.size()), job.prompt.end());
      auto c = codec_->continuation(t, job.req.conv);
      if (c.keep == t.size()) return std::move(c.append);
      // Recurrent state cannot be cut back, so a token mismatch would mean a full re-prefill.
      // Generated tokens need not be the canonical encoding of the text the client sends
      // back; if the cached tokens spell exactly a prefix of the new prompt's bytes that
      // ends on one of its token boundaries, continue from there.
      std::vector<int32_t> full(t.begin(), t.begin() + long(c.keep));
      full.insert(full.end(), c.append.begin(), c.append.end());
      return byte_continuation(*codec_, t, full);
    }, /*use_alias=*/true);
  }
  // Nothing in memory: the longest checkpoint on disk (its tokens or its turn alias are a
  // prefix of the prompt). The file is read on a reader thread; until it is in, this job
  // stays new and the other sessions keep stepping (alone, it waits a little per round).
  if (!hit && checkpoints_) {
    const auto wait = live_.size() > 1 ? std::chrono::microseconds(0) : std::chrono::microseconds(2000);
    if (checkpoints_->restore(job.prompt, job.restore, hit, wait) == SessionCheckpoints::Restore::kPending) return;
  }
  if (hit && (!hit->append.empty() || !hit->logits.empty())) {
    job.state = std::move(hit->state);
    job.history = std::move(hit->tokens);
    job.logits = std::move(hit->logits);
    job.pending = std::move(hit->append);
    job.usage.cached_tokens = int64_t(job.history.size());
  } else {
    job.state = model_->new_state();
    if (spec_depth_ > 0) model_->draft_head()->enable_draft(*job.state);
    job.pending = job.prompt;
  }
  job.usage.prompt_tokens = int64_t(job.history.size() + job.pending.size());
  job.usage.seed = job.req.sampler.seed;
  {
    std::lock_guard lk(metrics_mu_);
    (job.usage.cached_tokens > 0 ? m_.cache_hits : m_.cache_misses)++;
    m_.prompt_tokens += uint64_t(job.usage.prompt_tokens);
    m_.cached_tokens += uint64_t(job.usage.cached_tokens);
  }
  if (job.usage.prompt_tokens >= context_size_) throw InputError("prompt does not fit the context");
  GenEvent started;
  started.kind = GenEvent::Kind::kStarted;
  started.usage = job.usage;
  job.handle->push(std::move(started));
  job.sampler.emplace(sampler_kind_, job.req.sampler);
  job.text = codec_->stream();
  if (job.req.parse_output && !job.req.raw_prompt) {
    job.reasoning = codec_->starts_in_reasoning(job.req.conv);
    job.parser = codec_->parser(job.reasoning, job.req.conv.tools);
  }
  job.stops.emplace(job.req.stop);
  job.phase = Job::Phase::kPrefill;
  if (job.pending.empty()) {
    job.usage.prefill_s = 0;
    job.phase = Job::Phase::kDecode;
  }
}

// A prefill slice of `job`: up to max_tokens (and a chunk) of its pending prompt, ended at
// the turn boundary (whose logits are asked for: a complete state, publishable in memory and on
// disk like a turn end).
Engine::PrefillSlice Engine::plan_prefill(const Job& job, int64_t max_tokens) const {
  PrefillSlice p;
  p.n = std::min<size_t>(size_t(std::min(prefill_chunk_, max_tokens)), job.pending.size() - job.pending_at);
  const size_t at0 = job.history.size();
  p.to_boundary = job.turn_start > at0 && job.turn_start <= at0 + p.n;
  if (p.to_boundary) p.n = job.turn_start - at0;
  p.last = job.pending_at + p.n == job.pending.size();
  return p;
}

void Engine::prefill_step(Job& job, int64_t max_tokens) {
  const PrefillSlice p = plan_prefill(job, max_tokens);
  model_->forward(*job.state, std::span<const int32_t>(job.pending.data() + job.pending_at, p.n),
                  p.last || p.to_boundary ? Logits::kLast : Logits::kNone, job.logits);
  after_prefill(job, p);
}

// The granted prefill slices of one iteration: as one Model::prefill_batch where the model
// feeds several sequences in one pass (each state and row bit for bit its own forward's), else
// one forward each. A batch that fails its checks (InputError: no state moved) runs the slices one
// by one; any other throw ends every turn in it (prefill_batch's contract: the states are
// unspecified); a lone slice that throws ends its own turn.
void Engine::prefill_slices(const std::vector<Job*>& jobs, const std::vector<int64_t>& grants) {
  auto one_by_one = [&] {
    for (size_t i = 0; i < jobs.size(); ++i) {
      try {
        prefill_step(*jobs[i], grants[i]);
      } catch (const std::exception& e) {
        fail(*jobs[i], e.what());
      }
    }
  };
  if (jobs.size() < 2 || !batching_ || !model_->info().batched_prefill) return one_by_one();
  std::vector<PrefillSlice> plan;
  std::vector<ModelState*> states;
  std::vector<std::span<const int32_t>> windows;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& j = *jobs[i];
    plan.push_back(plan_prefill(j, grants[i]));
    states.push_back(j.state.get());
    windows.emplace_back(j.pending.data() + j.pending_at, plan.back().n);
  }
  std::vector<float>& rows = batch_rows_;  // (released with the decode rows: iterate)
  try {
    model_->prefill_batch(states, windows, rows);
  } catch (const InputError&) {
    // The batch's checks (check_batch) left every state as it was: one slice at a time, so only
    // the one that is wrong ends its turn.
    return one_by_one();
  } catch (const std::exception& e) {
    for (Job* j : jobs) fail(*j, e.what());
    return;
  }
  {
    std::lock_guard lk(metrics_mu_);
    m_.batched_prefill_calls++;
    m_.batched_prefill_sequences += jobs.size();
  }
  const size_t V = size_t(model_->info().vocab_size);
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& j = *jobs[i];
    // What forward() leaves: the last token's row where it was asked for, else nothing.
    if (plan[i].last || plan[i].to_boundary) j.logits.assign(rows.begin() + long(i * V), rows.begin() + long((i + 1) * V));
    else j.logits.clear();
    try {  // (publishing the turn boundary writes a checkpoint: as prefill_step, its failure ends this turn)
      after_prefill(j, plan[i]);
    } catch (const std::exception& e) {
      fail(j, e.what());
    }
  }
}

// The bookkeeping after a slice's forward: history, the turn boundary's publication, the
// prefix-cache branch points, progress events, and the end of the prompt.
void Engine::after_prefill(Job& job, const PrefillSlice& p) {
  const size_t n = p.n;
  const int32_t* chunk = job.pending.data() + job.pending_at;
  job.history.insert(job.history.end(), chunk, chunk + n);
  job.pending_at += n;
  if (p.to_boundary && !p.last) publish_turn_start(job);
  {
    std::lock_guard lk(metrics_mu_);
    m_.computed_prompt_tokens += n;
  }
  if (!p.last) {
    // A branch point for later prompts that share this prefix (see EngineOptions).
    const size_t at = job.history.size();
    if (!p.to_boundary && snapshot_every_ > 0 && (at / size_t(snapshot_every_)) > ((at - n) / size_t(snapshot_every_)))
      cache_.insert(job.history, job.state->clone(), {});
    if (job.usage.completion_tokens > 0) return;  // a preempted turn's recompute: no progress events
    GenEvent ev;
    ev.kind = GenEvent::Kind::kProgress;
    ev.done = int64_t(job.pending_at);
    ev.total = int64_t(job.pending.size());
    job.handle->push(std::move(ev));
    return;
  }
  if (job.usage.completion_tokens == 0) {  // the prompt's prefill (not a preempted turn's recompute)
    job.usage.prefill_s = seconds(job.t_prefill, Clock::now());
    std::lock_guard lk(metrics_mu_);
    m_.prefill_seconds += job.usage.prefill_s;
  }
  job.pending.clear();
  job.phase = Job::Phase::kDecode;
  // A complete state (every prompt token fed, logits of the last one): safe to publish.
  if (snapshot_prompt_) cache_.insert(job.history, job.state->clone(), job.logits);
}

// The state at the turn boundary: a clone in the prefix cache (counted in its budget, LRU)
// and a checkpoint on disk. The next turn matches it by exact token prefix.
void Engine::publish_turn_start(Job& job) {
  std::vector<int32_t> tokens(job.history);
  if (checkpoints_) checkpoints_->save(tokens, *job.state, job.logits);
  cache_.insert(std::move(tokens), job.state->clone(), job.logits);
}

}  // namespace ds4::engine
