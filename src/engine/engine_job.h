#pragma once
// Internal: one request's life inside the engine thread (engine.cpp, engine_decode.cpp).
#include <chrono>
#include <optional>

#include "engine/engine.h"
#include "engine/session_checkpoints.h"
#include "engine/speculative.h"
#include "engine/stop_matcher.h"

namespace ds4::engine {

using Clock = std::chrono::steady_clock;
inline double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Engine::Job {
  GenRequest req;
  std::shared_ptr<RequestHandle> handle;
  std::vector<int32_t> prompt;  // rendered at submit; the cache may replace its head
  enum class Phase { kNew, kPrefill, kDecode, kDone } phase = Phase::kNew;
  std::unique_ptr<ModelState> state;
  std::vector<int32_t> history;  // tokens the state holds (after pending is fed)
  std::vector<int32_t> pending;  // prompt tokens still to feed
  size_t pending_at = 0;
  // Prompt tokens before the generation prompt (turn_boundary.h); 0 = none. A prefill chunk
  // ends there and that state is published: the next turn's prompt starts with it even when
  // the client drops this turn's reasoning.
  size_t turn_start = 0;
  std::vector<float> logits;     // last position's logits
  std::optional<Sampler> sampler;
  std::unique_ptr<TextStream> text;
  std::unique_ptr<tok::OutputParser> parser;
  tok::ParsedOutput parsed;      // everything the parser emitted (the answer a client sends back)
  std::optional<StopMatcher> stops;
  bool reasoning = false;        // last parsed text was reasoning
  int32_t to_feed = -1;          // sampled token still to feed into the state
  Usage usage;
  std::unique_ptr<TokenConstraint> constraint;  // tool_choice decoding (null: unconstrained)
  bool tool_error_seen = false;       // the parser reported a tool call it could not take
  int spec_depth = 0;                 // resolved per request at submit; 0 = no speculation
  std::unique_ptr<SpecDecoder> spec;  // turns with speculation on
  bool spec_declined = false;         // this turn decided at its first step not to speculate
  bool spec_requested = false;        // the request asked for speculation: the default does not apply
  int32_t spec_next = -1;             // the token the last cycle chose; emitted by the next step
  // The token already drawn right after the decode forward (from the model's candidates,
  // which only that forward's call can hand back); emitted by the next step. Same draws in
  // the same order as sampling in the next step.
  int32_t sampled_next = -1;
  // The state from just before the token where held-back stop-string text began: if that
  // text turns out to be a stop string, this (not the final state, which holds the stop
  // string's tokens that the client never sees) is the turn end a next prompt can continue.
  // stop_at: the tokens before that token (prompt included); when it was a speculative
  // draft already fed, no such state was kept and finish() rebuilds it.
  struct Snapshot {
    std::vector<int32_t> tokens;
    std::unique_ptr<ModelState> state;
    std::vector<float> logits;
  };
  std::optional<Snapshot> pre_stop;
  size_t stop_at = 0;
  std::shared_ptr<SessionCheckpoints::Pending> restore;  // a checkpoint read in flight
  std::chrono::steady_clock::time_point t_submit, t_prefill, t_first;
  std::optional<CanaryMonitor::Mark> canary_mark;  // set when the turn's first step runs
  // Preempted at least once (engine_admission.cpp): `pending` holds every token its state
  // held (prompt, emitted tokens), re-fed when it is admitted again; the sampler, text
  // stream, parser and stop matcher carry on as they were (same RNG stream).
  bool resumed = false;
  // Swapped to host at its preemption (EngineOptions::preempt_swap): the state's sections and
  // the phase it was in; `history`, `pending`, `to_feed` and `logits` stay as they were, and
  // resume() loads the sections into a fresh state. Empty: recomputed (or never preempted).
  std::vector<StateSection> swapped;
  size_t swapped_bytes = 0;
  Phase swapped_phase = Phase::kNew;
};

}  // namespace ds4::engine
