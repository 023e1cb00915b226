#pragma once
// What a client asks the engine for and what it gets back. Events flow through a per-request
// channel that the engine thread fills and a server thread drains; cancel is a flag the
// engine checks before every step.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/canary_monitor.h"
#include "engine/sampler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tool_grammar.h"

namespace ds4::engine {

struct GenRequest {
  tok::Conversation conv;               // chat mode (rendered with the family template)
  std::optional<std::string> raw_prompt;  // completion mode: plain text, no template
  SamplerParams sampler;                // resolved (family defaults + settings + request)
  int64_t max_tokens = 256;
  std::vector<std::string> stop;        // stop strings (never part of the output)
  bool parse_output = true;             // split reasoning / content / tool calls
  // none / required / a function: decoding is constrained to the family's tool-call format
  // (engine/token_constraint.h); auto leaves it to the model.
  tok::ToolChoice tool_choice;
  // Per-request speculation (the `speculative` extension): unset = the server's setting.
  // enabled true needs a server that runs its draft head (Engine::submit refuses otherwise).
  std::optional<bool> spec_enabled;
  std::optional<int> spec_depth;        // 1..5
};

enum class Finish { kNone, kStop, kStopString, kLength, kContext, kCancelled, kError };
const char* finish_name(Finish f);

struct Usage {
  int64_t prompt_tokens = 0;      // whole prompt, cached included
  int64_t cached_tokens = 0;      // reused from the prefix cache
  int64_t completion_tokens = 0;  // sampled tokens, the final stop token included
  int64_t reasoning_tokens = 0;   // part of completion_tokens spent in reasoning
  double queue_s = 0, prefill_s = 0, ttft_s = 0, decode_s = 0;
  uint64_t seed = 0;  // the sampler seed of this turn: sending it back reproduces the answer
  // Speculative decoding (engine/speculative.h), the turn's category: "greedy" (argmax turn),
  // "exact" / "opportunistic" (sampled turn, on the family's sampler), "target_only" when
  // speculation was off or not applicable; and the turn's effective DSpark confidence gate
  // (resolve_dspark_confidence; heads without a confidence head ignore it).
  std::string spec_mode = "target_only";
  // Why this turn did not speculate although the server does: "request" (speculative.enabled
  // false) or "constrained" (tool_choice decoding masks every step; drafts are not checked
  // against the grammar, so constrained turns run target-only). Empty otherwise.
  std::string spec_off_reason;
  int spec_depth = 0;                   // the depth this turn speculated at (0: it did not)
  // Constrained decoding (tool_choice none / required / a function): steps whose logits were
  // masked; 0 for an unconstrained turn.
  int64_t constrained_steps = 0;
  double spec_dspark_confidence = 0;
  int64_t spec_drafted = 0, spec_accepted = 0, spec_bonus = 0, spec_repairs = 0, spec_full_replays = 0;
  int64_t spec_corrections = 0, spec_prefix_commits = 0;
  double spec_draft_s = 0, spec_verify_s = 0, spec_commit_s = 0;
  // Decode-step draws from the model's top candidates (no full logits row copied), and those
  // that asked for candidates but needed the full row after all (EngineOptions::sample_candidates).
  int64_t sampled_from_candidates = 0, sampled_full_fallback = 0;
  // Times this turn was preempted (its state dropped and recomputed: admission control).
  int64_t preemptions = 0;
  // GPU canary latencies over this turn (SPEC §6); absent when the model runs on the CPU or
  // the build has no CUDA (absent, not zeros: no probe ran).
  std::optional<CanaryStats> gpu_canary;
};

struct GenEvent {
  // kStarted: prefill begins; usage has prompt_tokens and cached_tokens.
  // kToolCallError: a tool call the parser could not take (cut off, malformed, another
  // family's format); text = the raw text, error_type / error = what went wrong.
  enum class Kind { kStarted, kReasoning, kContent, kToolCall, kToolCallError, kProgress, kDone, kError };
  Kind kind = Kind::kContent;
  std::string text;      // deltas; kError: message
  tok::ToolCall call;    // kToolCall
  std::string error_type, error;  // kToolCallError
  int64_t done = 0, total = 0;  // kProgress: prompt tokens computed so far / to compute
  Finish finish = Finish::kNone;  // kDone
  std::string stop_string;        // kDone with kStopString
  Usage usage;                    // kDone
};

inline GenEvent error_event(std::string msg) {
  GenEvent e;
  e.kind = GenEvent::Kind::kError;
  e.text = std::move(msg);
  return e;
}
inline GenEvent text_event(GenEvent::Kind kind, std::string text) {
  GenEvent e;
  e.kind = kind;
  e.text = std::move(text);
  return e;
}

// One request's channel. Thread-safe.
class RequestHandle {
 public:
  // Waits up to `timeout` for the next event; nullopt on timeout (callers send keepalives).
  std::optional<GenEvent> next(std::chrono::milliseconds timeout);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // Engine side.
  void push(GenEvent ev);
  bool finished() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenEvent> events_;
  bool done_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace ds4::engine
