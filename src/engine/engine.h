#pragma once
// The runtime: one thread owns the model and every live session's state; requests arrive
// through a queue. Continuous batching: requests join and leave the live set at every
// iteration; each iteration steps every decoding session once (one token, or one
// speculative cycle) and feeds prefill slices of new or long prompts under a per-iteration
// token budget (step_scheduler.h), so a long prompt never stalls the others. The plain decode
// steps of an iteration run as one Model::decode_batch call where the model reads each
// weight once for all of them (ModelInfo::batched_decode); the speculative cycles draft per
// session and verify together in one Model::verify_batch (ModelInfo::batched_verify,
// engine_spec_batch.cpp). EngineOptions::batching = false gives the engine of before (a whole chunk per
// prefilling session per iteration, decode forwards one after another) for comparison.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/codec.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/spec_cost.h"
#include "engine/state_budget.h"
#include "engine/step_scheduler.h"
#include "models/model.h"
#include "persist/checkpoint_stats.h"

namespace ds4::engine {

struct SpecCycle;  // speculative.h

class SessionCheckpoints;

struct EngineOptions {
  int64_t context_size = 0;     // 0 = model max_context
  int64_t prefill_chunk = 0;    // 0 = model default_prefill_chunk
  size_t cache_bytes = size_t(2) << 30;  // prefix cache budget
  int max_live = 64;            // sessions stepped concurrently; the rest wait in the queue
  // Also snapshot at the end of each prefill: a regenerate, an edited last answer or an
  // answer the template re-renders differently (trimmed whitespace) still reuses the prompt.
  bool snapshot_prompt = true;
  // Recurrent state cannot be cut back, so a later prompt that branches inside a long prompt
  // can only resume from a snapshot taken at or before the branch point: snapshot at the
  // first chunk end after every `snapshot_every` prompt tokens. 0 = auto (4096 tokens,
  // rounded up to whole prefill chunks), < 0 = off. Bounded by cache_bytes like every entry.
  int64_t snapshot_every = 0;
  // On-disk session checkpoints (session_checkpoints.h); empty dir = off.
  std::string checkpoint_dir;
  uint64_t checkpoint_budget_bytes = uint64_t(4) << 30;
  // Speculative decoding with the model's draft head; 0 = off. Greedy turns use category
  // greedy; sampled turns (on the family's sampler: MTPLX for Qwen, ds4's for GLM and
  // DeepSeek) use spec_sampling: exact (default, the distribution-preserving walk),
  // opportunistic, or target_only (no speculation).
  int spec_depth = 0;
  // With spec_depth > 0: whether a turn whose request does not say speculates. nullopt =
  // the measured cost model decides (spec_cost.h; measured at start on the engine thread):
  // what the settings' `speculative.enabled: auto` (their default) passes. Code that builds
  // an engine with a depth (tests, benches) speculates unless it asks for the cost model.
  std::optional<bool> spec_default = true;
  std::string spec_sampling = "exact";
  // DSpark confidence gate as set by the user (unset = the per-turn rule of SPEC §2, see
  // resolve_dspark_confidence); resolved per turn into SpecConfig::dspark_confidence.
  std::optional<double> dspark_confidence;
  // GPU canary of a CUDA model (backend/cuda/canary.h GpuCanary; null = none, a CPU model).
  // The engine starts it, reports its per-turn latencies in Usage::gpu_canary and aborts a
  // turn whose probes stalled past the canary's stall_s.
  std::shared_ptr<CanaryMonitor> canary;
  // Decode steps of non-speculating turns ask the model for the last row's top candidates
  // (Model::forward_candidates: on CUDA one small copy back per step instead of the row)
  // where the sampler settings allow it (Sampler::candidates_k); false = always the full row.
  bool sample_candidates = true;
  int sample_candidates_k = 256;  // candidates for ds4's min-p without top-k (else top_k)
  // Continuous batching (see above); false = round-robin without budget or batched decode.
  bool batching = true;
  // Tokens one iteration feeds (decode steps + prefill slices); 0 = auto (one prefill chunk).
  // Prefill always gets at least a quarter of it (step_scheduler.h).
  int64_t step_tokens = 0;
  // Admission control (state_budget.h, engine_admission.cpp): bytes the live sessions' model
  // states and the prefix cache may hold together; 0 = auto (90% of the memory available
  // when the engine starts). A request whose projected state could never fit is refused
  // (CapacityError); one that does not fit beside the running ones waits in the queue; running
  // ones that would outgrow it preempt the youngest (its state is dropped and recomputed
  // when it is admitted again, or swapped to host: preempt_swap).
  size_t state_memory_bytes = 0;
  // Preemption by swap to host instead of recompute: the preempted state's sections
  // (ModelState::save; a CUDA state copies its device caches to host memory) wait with the
  // turn in the queue, and a fresh state loads them when it is admitted again: nothing is
  // re-fed. For states in device memory, where a long context's re-prefill costs far more than
  // the copies. A turn whose sections do not fit swap_bytes (or whose save fails) is recomputed.
  bool preempt_swap = false;
  size_t swap_bytes = 0;  // host bytes the swapped states may hold together; 0 = auto (half the host's available memory)
};

struct EngineMetrics {
  uint64_t requests_total = 0, requests_failed = 0, requests_cancelled = 0;
  uint64_t prompt_tokens = 0, cached_tokens = 0, computed_prompt_tokens = 0, generated_tokens = 0;
  uint64_t cache_hits = 0, cache_misses = 0, cache_evictions = 0;
  size_t cache_bytes = 0, cache_entries = 0;
  int64_t queue_depth = 0, live = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  CheckpointStats checkpoints;  // on-disk session checkpoints (all zero when off)
  std::optional<CanaryTotals> canary;  // lifetime GPU canary histogram; absent without one
  uint64_t canary_aborts = 0;          // turns aborted by a GPU stall
  // Decode-step draws: from the model's candidates, and from the full row after asking for
  // candidates that could not decide the draw (see EngineOptions::sample_candidates).
  uint64_t sampled_from_candidates = 0, sampled_full_fallback = 0;
  // Continuous batching. running / prefilling: sessions that decoded / were fed a prefill
  // slice in the last iteration. decode_steps_by_size[i]: iterations whose decode steps
  // numbered <= kBatchBounds[i] (the last bucket: more); batched_calls / batched_rows: the
  // Model::decode_batch calls and the sequences they carried (each weight read once per call);
  // batched_verify_calls / batched_verify_rows: the Model::verify_batch calls (one per
  // iteration with speculating sessions) and the window rows they carried.
  static constexpr int64_t kBatchBounds[] = {1, 2, 4, 8, 16, 32, 64};
  int64_t running = 0, prefilling = 0, step_tokens = 0;
  uint64_t decode_steps_by_size[8] = {};
  uint64_t decode_iterations = 0, decode_sequences = 0;  // histogram count and sum
  uint64_t batched_calls = 0, batched_rows = 0;
  // Where an iteration's time goes: wall seconds of the iterations that decoded (scheduling,
  // prefill slices, forwards, draws, emitting), and of that the batched decode forwards
  // (Model::decode_batch_candidates, the candidates and the rows asked for included).
  double iteration_seconds = 0, batched_decode_seconds = 0;
  // Admission control: bytes the live sessions' states hold (paged blocks shared with other
  // sessions or the prefix cache counted by share: ModelState::proportional_bytes; the prefix
  // cache is cache_bytes), the budget for both, and turns preempted (state dropped, requeued).
  size_t state_bytes = 0, state_budget_bytes = 0;
  uint64_t preemptions = 0;
  // Preemptions by swap to host (the rest recomputed) and the host bytes swapped states hold.
  uint64_t swap_outs = 0;
  size_t swapped_bytes = 0, swap_budget_bytes = 0;
  uint64_t batched_verify_calls = 0, batched_verify_rows = 0;
  // Model::prefill_batch calls (the prompt slices of several sessions in one forward) and the
  // sessions they fed.
  uint64_t batched_prefill_calls = 0, batched_prefill_sequences = 0;
  // Bytes the batched logits rows buffer holds between iterations (0 once no turn is live).
  size_t batch_rows_bytes = 0;
};

class Engine {
 public:
  Engine(std::unique_ptr<Model> model, std::unique_ptr<Codec> codec, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues. Throws ds4::InputError (bad sampler values, prompt longer than
  // the context, empty prompt); everything later is reported through the handle.
  std::shared_ptr<RequestHandle> submit(GenRequest req);
  // Prompt tokens a request would have (rendered and encoded; no model work).
  int64_t count_tokens(const GenRequest& req) const;
  // Stops taking work; cancels queued and live requests (their partial output is kept, no
  // state is published) and joins the runtime thread. Idempotent.
  void shutdown();

  const ModelInfo& model_info() const { return model_->info(); }
  const Codec& codec() const { return *codec_; }
  SamplerKind sampler_kind() const { return sampler_kind_; }
  int64_t context_size() const { return context_size_; }
  int64_t prefill_chunk() const { return prefill_chunk_; }
  int64_t snapshot_every() const { return snapshot_every_; }  // 0 = off
  // The state-memory budget in bytes and what one state costs (admission control).
  size_t state_memory_budget() const { return budget_->bytes(); }
  StateCost state_cost() const { return budget_->cost(); }
  // Draft depth the engine speculates with: 0 when off or when the model has no draft head.
  int speculative_depth() const { return spec_depth_; }
  // Whether a turn whose request does not say speculates (the per-request switch calls
  // this for its default), and why: the settings, or the measured cost model at the number of
  // streams decoding now (spec_cost.h: a turn starting under load weighs the batched forwards).
  struct SpecDefault {
    bool enabled = false;
    std::string source;         // "settings", "cost model", "no draft head"
    SpecCostInputs inputs;      // cost model inputs (zero when it was not measured)
    SpecCostDecision decision;  // its verdict (also when the settings override it)
  };
  SpecDefault speculation_default() const;
  bool speculate_by_default() const { return speculation_default().enabled; }
  // Streams that decoded in the engine's last iteration (>= 1): the load the decision weighs.
  int64_t decode_streams() const { return decode_streams_.load(std::memory_order_relaxed); }
  EngineMetrics metrics() const;

  struct Job;  // engine_job.h (public: the decode helpers take it)

 private:
  void run();
  void iterate();  // one scheduler iteration over the live set
  bool admit();
  void step(Job& job);
  void start(Job& job);
  void prefill_step(Job& job, int64_t max_tokens);  // feeds up to max_tokens (and a chunk)
  struct PrefillSlice {
    size_t n = 0;              // tokens fed
    bool to_boundary = false;  // ends at the turn boundary (its logits asked for)
    bool last = false;         // ends the prompt
  };
  PrefillSlice plan_prefill(const Job& job, int64_t max_tokens) const;
  void after_prefill(Job& job, const PrefillSlice& p);
  // An iteration's granted prefill slices: one Model::prefill_batch where the model batches them.
  void prefill_slices(const std::vector<Job*>& jobs, const std::vector<int64_t>& grants);
  void publish_turn_start(Job& job);  // the state before the generation prompt (turn_boundary.h)
  void decode_batch(std::vector<Job*>& jobs);
  void decode_one(Job& j);                  // one plain decode forward (engine_decode.cpp)
  void decode_together(std::vector<Job*>& jobs);  // one Model::decode_batch for all (engine_batch.cpp)
  CandidateRequest candidate_request(const Job& j) const;
  void forward_and_sample(Job& j, int32_t t, const CandidateRequest& req);  // engine_decode.cpp
  void count_draw(Job& j, bool fallback);
  // fed: the token is already in the state (an accepted speculative draft).
  void emit_token(Job& job, int32_t token, bool fed = false);
  bool spec_decode(Job& job);  // engine_spec.cpp; false: this turn does not speculate
  // engine_spec_batch.cpp: the iteration's speculative cycles, their verifies in one
  // Model::verify_batch where the model batches them; turns that never speculate join `plain`.
  // True when the verify rows went through batch_rows_.
  bool speculate(std::vector<Job*>& jobs, std::vector<Job*>& plain);
  bool spec_ready(Job& job);                  // engine_spec.cpp: false: the turn does not speculate
  int64_t spec_budget(const Job& job) const;  // the cycle's token budget (< 1: a plain step)
  void feed_last(Job& job);                   // feeds job.to_feed alone (kLast logits)
  void spec_emit(Job& job, int32_t next, SpecCycle& c);  // a finished cycle's tokens to the turn
  void measure_spec_cost();    // engine_spec_warmup.cpp: warmup costs for the cost model
  void constrained_step(Job& job);  // a draw under the turn's tool_choice constraint
  void finish(Job& job, Finish why);
  // Ends a turn with an error event (a forward or a step threw) and counts it as failed.
  void fail(Job& job, const std::string& why);
  void publish_pre_stop(Job& job);  // a turn ended by a stop string (engine_decode.cpp)
  std::vector<int32_t> prompt_tokens(const GenRequest& req) const;
  void check_canary();  // engine_canary.cpp: aborts the live turns a GPU stall hit
  // Admission control (engine_admission.cpp, state_budget.h).
  size_t need(const Job& job) const;        // projected state bytes at the turn's end
  size_t held(const Job& job) const;        // state bytes the turn holds now (proportional shares)
  bool fits(const Job& queued);             // may start now (evicts cache entries for it)
  void preempt_to_fit(std::vector<Job*>& decode, std::vector<Job*>& prefill);
  void preempt(Job& job);                   // drop (or swap out) the state, keep the tokens, requeue
  bool swap_out(Job& job);                  // the state's sections to host memory (preempt_swap)
  void to_replay(Job& job);                 // the turn's tokens as its pending prompt (recompute)
  size_t swapped_bytes() const;             // host bytes the queued swapped states hold
  bool resume(Job& job);                    // a preempted turn's start: swap in or re-prefill
  void publish_state_bytes();


  std::unique_ptr<Model> model_;
  std::unique_ptr<Codec> codec_;
  SamplerKind sampler_kind_;
  int64_t context_size_, prefill_chunk_;
  int64_t snapshot_every_ = 0;  // resolved; 0 = no chunk snapshots
  int max_live_;
  int spec_depth_ = 0;
  std::optional<bool> spec_default_;
  SpecCostModel spec_cost_;
  std::atomic<int64_t> decode_streams_{1};  // set by decode_batch, read by /health too
  std::string spec_sampling_ = "exact";
  std::optional<double> dspark_confidence_;
  bool snapshot_prompt_;
  bool sample_candidates_ = true;
  int sample_candidates_k_ = 256;
  bool batching_ = true;
  // The stacked logits rows of an iteration's batched verify or decode (rows x vocab floats),
  // kept from one iteration to the next instead of allocated each time. Released by the
  // first iteration that runs no batched forward (decode_batch) and when no turn is live
  // (iterate), so it never holds more than the largest batch of the current run: max_live x
  // (depth + 1) x vocab floats (EngineMetrics::batch_rows_bytes).
  std::vector<float> batch_rows_;
  std::vector<SampleCandidates> batch_cands_;  // decode_together's per-row candidates (reused)
  std::optional<StepScheduler> scheduler_;  // set in the constructor (needs the chunk)
  size_t state_memory_request_ = 0;         // EngineOptions::state_memory_bytes
  bool preempt_swap_ = false;               // EngineOptions::preempt_swap
  size_t swap_budget_ = 0;                  // EngineOptions::swap_bytes, resolved
  std::optional<StateBudget> budget_;       // set on the engine thread before it is ready
  PrefixCache cache_;
  std::unique_ptr<SessionCheckpoints> checkpoints_;  // null = checkpoints off
  std::shared_ptr<CanaryMonitor> canary_;             // null = no GPU canary

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;
  std::vector<std::unique_ptr<Job>> live_;
  bool stopping_ = false;
  std::thread thread_;

  mutable std::mutex metrics_mu_;
  EngineMetrics m_;
};

}  // namespace ds4::engine
