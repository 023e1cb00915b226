// Decode side of the engine: token -> text -> stop strings -> parser -> events; finish
// reasons; publishing the finished state to the prefix cache.
#include <algorithm>
#include <chrono>

#include "engine/engine.h"
#include "engine/engine_job.h"
#include "engine/session_checkpoints.h"

namespace ds4::engine {
namespace {

// The answer as the client sees it, so the turn end can be re-rendered the way it comes back.
void record(Engine::Job& job, const tok::ParseEvent& ev) {
  switch (ev.kind) {
    case tok::ParseEvent::Kind::kReasoning: job.parsed.reasoning += ev.text; break;
    case tok::ParseEvent::Kind::kContent: job.parsed.content += ev.text; break;
    case tok::ParseEvent::Kind::kToolCall: job.parsed.tool_calls.push_back(ev.call); break;
    // The client gets the error, not the text; what the model wrote stays the turn's text
    // for the next prompt's render (so the cached state still matches).
    case tok::ParseEvent::Kind::kToolCallError:
      job.parsed.content += ev.text;
      job.tool_error_seen = true;
      break;
  }
}

GenEvent to_event(tok::ParseEvent&& ev) {
  GenEvent out;
  switch (ev.kind) {
    case tok::ParseEvent::Kind::kReasoning: out.kind = GenEvent::Kind::kReasoning; break;
    case tok::ParseEvent::Kind::kContent: out.kind = GenEvent::Kind::kContent; break;
    case tok::ParseEvent::Kind::kToolCall: out.kind = GenEvent::Kind::kToolCall; break;
    case tok::ParseEvent::Kind::kToolCallError: out.kind = GenEvent::Kind::kToolCallError; break;
  }
  out.text = std::move(ev.text);
  out.call = std::move(ev.call);
  out.error_type = std::move(ev.error_type);
  out.error = std::move(ev.error);
  return out;
}

void push_text(Engine::Job& job, const std::string& text) {
  if (text.empty()) return;
  if (!job.parser) {
    job.handle->push(text_event(GenEvent::Kind::kContent, text));
    return;
  }
  for (auto& ev : job.parser->feed(text)) {
    job.reasoning = ev.kind == tok::ParseEvent::Kind::kReasoning;
    record(job, ev);
    job.handle->push(to_event(std::move(ev)));
  }
}

void flush_parser(Engine::Job& job) {
  if (!job.parser) return;
  for (auto& ev : job.parser->finish()) {
    record(job, ev);
    job.handle->push(to_event(std::move(ev)));
  }
}

// A finished turn comes back from the client as parsed text, which the template re-renders
// with its own whitespace rules (Qwen and GLM strip reasoning and content), so the next
// prompt need not repeat the generated tokens. The canonical render of this turn, up to and
// including its end marker, names the same state: the snapshot is reused when the next
// prompt starts with it. `held`: the tokens the state holds; `held_end`: whether they include
// the end marker (a stop token) or not (max_tokens, context end, a stop string: the alias then
// still ends with the marker, so it only matches a prompt that closes this very turn, and
// the marker is fed on reuse). Returns the alias and how many of its tokens the state stands
// for; empty when the state's own tokens already are the canonical render, or when nothing
// but whitespace may differ and more does.
struct Alias {
  std::vector<int32_t> tokens;
  size_t fed = 0;
};
Alias turn_alias(const Codec& codec, const Engine::Job& job, const std::vector<int32_t>& held, bool held_end) {
  if (!job.parser || job.req.raw_prompt) return {};
  tok::Conversation conv = job.req.conv;
  tok::Message a;
  a.role = "assistant";
  a.content = job.parsed.content;
  a.reasoning = job.parsed.reasoning;
  a.tool_calls = job.parsed.tool_calls;
  conv.messages.push_back(std::move(a));
  conv.add_generation_prompt = false;
  std::vector<int32_t> r;
  try {
    r = codec.render(conv);
  } catch (const std::exception&) {
    return {};  // the answer cannot be rendered back (e.g. odd tool arguments): no alias
  }
  // The prompt must be a prefix of the re-render, else the alias would cover other tokens.
  const size_t n = job.prompt.size();
  if (r.size() <= n || !std::equal(job.prompt.begin(), job.prompt.end(), r.begin())) return {};
  size_t end = n;
  while (end < r.size() && !codec.is_stop_token(r[end])) ++end;
  if (end == r.size()) return {};
  r.resize(end + 1);
  const size_t stand = held_end ? end + 1 : end;
  // The generated part of the state (its head may be an earlier turn's non-canonical tokens).
  if (int64_t(held.size()) < job.usage.prompt_tokens) return {};
  const size_t gen = held.size() - size_t(job.usage.prompt_tokens);
  if (stand == held.size() && std::equal(r.begin(), r.begin() + long(stand), held.begin())) return {};
  // Only whitespace may differ: a template that rewrites more (DeepSeek drops reasoning of
  // past turns) describes other tokens than the state holds, and must not alias it.
  auto squeeze = [&](auto first, auto last) {
    std::string s;
    for (auto it = first; it != last; ++it)
      for (char c : codec.token_bytes(*it))
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r') s += c;
    return s;
  };
  if (squeeze(r.begin() + long(n), r.begin() + long(stand)) != squeeze(held.end() - long(gen), held.end())) return {};
  return {std::move(r), stand};
}
// A turn forced to call a tool (required / a named function) that ends before the parser saw
// any call, its opening marker not even complete (cut in the reasoning or inside the marker):
// the call the client asked for is missing, so say so like any cut-off call.
void report_missing_call(Engine::Job& job, Finish why) {
  using M = tok::ToolChoice::Mode;
  const M m = job.req.tool_choice.mode;
  if (!job.constraint || (m != M::kRequired && m != M::kFunction) || !job.parsed.tool_calls.empty() ||
      job.tool_error_seen || (why != Finish::kLength && why != Finish::kContext))
    return;
  GenEvent e;
  e.kind = GenEvent::Kind::kToolCallError;
  e.error_type = "truncated";
  e.error = "the output ended before the forced tool call was complete";
  e.text = job.parsed.content;
  job.handle->push(std::move(e));
}
}  // namespace

void Engine::emit_token(Job& job, int32_t token, bool fed) {
  auto now = Clock::now();
  if (job.usage.completion_tokens == 0) {
    job.t_first = now;
    job.usage.ttft_s = seconds(job.t_submit, now);
  }
  job.usage.completion_tokens++;
  {
    std::lock_guard lk(metrics_mu_);
    m_.generated_tokens++;
  }
  job.to_feed = fed ? -1 : token;
  // The stop token ends the turn; it is fed (so the cached state holds the whole turn, as
  // the next turn's template renders it) but never becomes text.
  if (codec_->is_stop_token(token)) return finish(job, Finish::kStop);
  const bool was_holding = job.stops->holding();
  std::string text = job.stops->feed(job.text->push(token));
  // Held-back text begins in this token: it may be a stop string, whose tokens the next
  // prompt will not repeat. Keep the state from before the token (it holds exactly
  // `history` unless the token was already fed as a speculative draft).
  if (!was_holding && (job.stops->holding() || job.stops->matched())) {
    job.stop_at = size_t(job.usage.prompt_tokens + job.usage.completion_tokens - 1);
    if (!fed) job.pre_stop = Job::Snapshot{job.history, job.state->clone(), job.logits};
  }
  push_text(job, text);
  // Counted after parsing: a token belongs to reasoning until the parser leaves it.
  if (job.reasoning) job.usage.reasoning_tokens++;
  if (job.stops->matched()) return finish(job, Finish::kStopString);
  if (job.usage.completion_tokens >= job.req.max_tokens) return finish(job, Finish::kLength);
  if (int64_t(job.history.size()) + 1 >= context_size_) return finish(job, Finish::kContext);
}

// The final state of a turn ended by a stop string holds the stop string's tokens; publish
// the state from before the token where it began. When that token was a speculative draft
// fed with its cycle, no such state was kept: rebuild it from the longest cached prefix
// (usually the prompt-end snapshot) when at most one prefill chunk is left to feed.
void Engine::publish_pre_stop(Job& job) {
  std::optional<Job::Snapshot> s = std::move(job.pre_stop);
  if ((!s || s->tokens.size() != job.stop_at) && job.stop_at <= job.history.size()) {
    std::vector<int32_t> tokens(job.history.begin(), job.history.begin() + long(job.stop_at));
    auto hit = cache_.lookup([&](const std::vector<int32_t>& t) -> std::optional<std::vector<int32_t>> {
      if (t.size() >= tokens.size() || !std::equal(t.begin(), t.end(), tokens.begin())) return std::nullopt;
      return std::vector<int32_t>(tokens.begin() + long(t.size()), tokens.end());
    });
    if (hit && int64_t(hit->append.size()) <= prefill_chunk_) {
      std::vector<float> logits;
      model_->forward(*hit->state, hit->append, Logits::kLast, logits);
      s = Job::Snapshot{std::move(tokens), std::move(hit->state), std::move(logits)};
    }
  }
  if (!s) return;
  Alias alias = turn_alias(*codec_, job, s->tokens, false);
  if (checkpoints_) checkpoints_->save(s->tokens, *s->state, s->logits);
  cache_.insert(std::move(s->tokens), std::move(s->state), std::move(s->logits), std::move(alias.tokens), alias.fed);
}

// Feeds `t` and draws the next token now, from the row's top-k candidates, or from the full
// row when the sampler says they cannot decide it (the model then hands back this step's
// row). j.logits is left as the model leaves it: the row or empty (a cached state with empty
// logits is continued by feeding a token, never sampled from).
void Engine::forward_and_sample(Job& j, int32_t t, const CandidateRequest& req) {
  SampleCandidates c;
  std::optional<int32_t> tok;
  model_->forward_candidates(*j.state, std::span<const int32_t>(&t, 1), req, c, j.logits,
                             [&](const SampleCandidates& cand) {
                               tok = j.sampler->sample_from(cand);
                               return !tok.has_value();
                             });
  const bool fallback = !tok.has_value();
  if (fallback) tok = j.sampler->sample(j.logits);
  j.sampled_next = *tok;
  count_draw(j, fallback);
}

void Engine::count_draw(Job& j, bool fallback) {
  (fallback ? j.usage.sampled_full_fallback : j.usage.sampled_from_candidates)++;
  std::lock_guard lk(metrics_mu_);
  (fallback ? m_.sampled_full_fallback : m_.sampled_from_candidates)++;
}

// A turn that does not speculate needs only the draw from its row: it takes it from the
// model's candidates where the sampler settings allow ({0, 0}: take the whole row). A
// constrained turn masks the whole row first, so it always takes the row.
CandidateRequest Engine::candidate_request(const Job& j) const {
  return sample_candidates_ && !j.constraint ? j.sampler->candidates_request(sample_candidates_k_)
                                             : CandidateRequest{0, 0.0};
}

void Engine::decode_batch(std::vector<Job*>& jobs) {
  // Speculative cycles first (engine_spec_batch.cpp: their verifies together where the model
  // batches them); the plain steps left go together into one batched forward where the model
  // reads each weight once for all of them.
  std::vector<Job*> plain, spec;
  for (Job* j : jobs)
    if (j->phase == Job::Phase::kDecode && j->to_feed >= 0) (j->spec_depth > 0 ? spec : plain).push_back(j);
  if (!spec.empty() || !plain.empty()) decode_streams_.store(int64_t(spec.size() + plain.size()), std::memory_order_relaxed);
  const bool verified = speculate(spec, plain);
  const bool together = batching_ && model_->info().batched_decode && plain.size() >= 2;
  if (together) decode_together(plain);
  else
    for (Job* j : plain) decode_one(*j);
  // No batched forward this iteration (the batched run ended, or is down to one stream):
  // give the rows buffer back rather than hold the largest batch's rows while idle.
  if (!verified && !together) std::vector<float>().swap(batch_rows_);
}

void Engine::decode_one(Job& j) {
  const int32_t t = j.to_feed;
  try {
    const CandidateRequest req = candidate_request(j);
    const auto t0 = Clock::now();
    if (req.k > 0) {
      forward_and_sample(j, t, req);
    } else {
      model_->forward(*j.state, std::span<const int32_t>(&t, 1), Logits::kLast, j.logits);
    }
    // The AR step as chats run it, for the speculation cost model (spec_cost.h).
    if (spec_depth_ > 0) spec_cost_.observe_decode(seconds(t0, Clock::now()));
    j.history.push_back(t);
    j.to_feed = -1;
  } catch (const std::exception& e) {
    fail(j, e.what());
  }
}

void Engine::fail(Job& job, const std::string& why) {
  job.handle->push(error_event(why));
  job.phase = Job::Phase::kDone;
  std::lock_guard lk(metrics_mu_);
  m_.requests_failed++;
}

void Engine::finish(Job& job, Finish why) {
  const bool publish = why != Finish::kCancelled && why != Finish::kError && job.state;
  if (why != Finish::kCancelled && why != Finish::kError) {
    // Release held-back text (no stop string matched) and whatever the parser buffers.
    if (job.text && why != Finish::kStopString) push_text(job, job.stops->feed(job.text->finish()));
    if (job.stops && !job.stops->matched()) push_text(job, job.stops->flush());
    flush_parser(job);
    report_missing_call(job, why);
  } else if (job.parser) {
    // Cancel keeps the partial text: flush what was already accepted.
    if (job.stops) push_text(job, job.stops->flush());
    flush_parser(job);
  }
  if (publish && job.phase == Job::Phase::kDecode) {
    try {
      if (why == Finish::kStopString) {
        publish_pre_stop(job);
      } else {
        if (job.to_feed >= 0) {
          const int32_t t = job.to_feed;
          model_->forward(*job.state, std::span<const int32_t>(&t, 1), Logits::kLast, job.logits);
          job.history.push_back(t);
          job.to_feed = -1;
        }
        Alias alias = turn_alias(*codec_, job, job.history, why == Finish::kStop);
        // A key that names this state on disk must stand for all of its tokens: an alias
        // whose end marker the state lacks (alias.fed < alias.tokens.size()) is not one.
        if (checkpoints_)
          checkpoints_->save(job.history, *job.state, job.logits,
                             alias.fed == alias.tokens.size() ? alias.tokens : std::vector<int32_t>{});
        cache_.insert(std::move(job.history), std::move(job.state), std::move(job.logits), std::move(alias.tokens),
                      alias.fed);
      }
    } catch (const std::exception&) {
      // A failed final feed only loses the snapshot; the answer is already complete.
    }
  }
  job.pre_stop.reset();
  if (job.spec) {  // live costs and acceptance for the cost model (spec_cost.h)
    const SpecStats& st = job.spec->stats();
    spec_cost_.observe(st.cycles, st.drafted, st.accepted, st.draft_s, st.verify_s, st.commit_s);
  }
  auto now = Clock::now();
  if (job.usage.completion_tokens > 0) job.usage.decode_s = seconds(job.t_first, now);
  {
    std::lock_guard lk(metrics_mu_);
    m_.decode_seconds += job.usage.decode_s;
    if (why == Finish::kCancelled) m_.requests_cancelled++;
  }
  GenEvent done;
  done.kind = GenEvent::Kind::kDone;
  done.finish = why;
  if (why == Finish::kStopString) done.stop_string = job.stops->matched_string();
  done.usage = job.usage;
  if (canary_ && job.canary_mark) done.usage.gpu_canary = canary_->snapshot(*job.canary_mark);
  job.handle->push(std::move(done));
  job.phase = Job::Phase::kDone;
  job.state.reset();
}

}  // namespace ds4::engine
