// Decode side of the engine: token -> text -> stop strings -> parser -> events; finish
// reasons; publishing the finished state to the prefix cache.
#include <algorithm>
#include <chrono>

#include "engine/engine.h"
#include "engine/engine_job.h"
#include "engine/session_checkpoints.h"

namespace ds4::engine {
namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The answer as the client sees it, so the turn end can be re-rendered the way it comes back.
void record(Engine::Job& job, const tok::ParseEvent& ev) {
  switch (ev.kind) {
    case tok::ParseEvent::Kind::kReasoning: job.parsed.reasoning += ev.text; break;
    case tok::ParseEvent::Kind::kContent: job.parsed.content += ev.text; break;
    case tok::ParseEvent::Kind::kToolCall: job.parsed.tool_calls.push_back(ev.call); break;
  }
}

void push_text(Engine::Job& job, const std::string& text) {
  if (text.empty()) return;
  if (!job.parser) {
    job.handle->push(text_event(GenEvent::Kind::kContent, text));
    return;
  }
  for (auto& ev : job.parser->feed(text)) {
    GenEvent out;
    switch (ev.kind) {
      case tok::ParseEvent::Kind::kReasoning: out.kind = GenEvent::Kind::kReasoning; break;
      case tok::ParseEvent::Kind::kContent: out.kind = GenEvent::Kind::kContent; break;
      case tok::ParseEvent::Kind::kToolCall: out.kind = GenEvent::Kind::kToolCall; break;
    }
    job.reasoning = ev.kind == tok::ParseEvent::Kind::kReasoning;
    record(job, ev);
    out.text = std::move(ev.text);
    out.call = std::move(ev.call);
    job.handle->push(std::move(out));
  }
}

void flush_parser(Engine::Job& job) {
  if (!job.parser) return;
  for (auto& ev : job.parser->finish()) {
    GenEvent out;
    out.kind = ev.kind == tok::ParseEvent::Kind::kReasoning ? GenEvent::Kind::kReasoning
               : ev.kind == tok::ParseEvent::Kind::kToolCall ? GenEvent::Kind::kToolCall
                                                              : GenEvent::Kind::kContent;
    record(job, ev);
    out.text = std::move(ev.text);
    out.call = std::move(ev.call);
    job.handle->push(std::move(out));
  }
}

// A turn that ended on a stop token comes back from the client as parsed text, which the
// template re-renders with its own whitespace rules (Qwen and GLM strip reasoning and
// content), so the next prompt need not repeat the generated tokens. The canonical render
// of this turn, up to and including its stop token, names the same state: the snapshot is
// reused when the next prompt starts with it. Empty when there is nothing to alias.
std::vector<int32_t> turn_alias(const Codec& codec, const Engine::Job& job) {
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
  // Only whitespace may differ: a template that rewrites more (DeepSeek drops reasoning of
  // past turns) describes other tokens than the state holds, and must not alias it.
  const size_t gen = size_t(job.usage.completion_tokens);
  if (gen > job.history.size()) return {};
  auto squeeze = [&](auto first, auto last) {
    std::string s;
    for (auto it = first; it != last; ++it)
      for (char c : codec.token_bytes(*it))
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r') s += c;
    return s;
  };
  if (squeeze(r.begin() + long(n), r.end()) != squeeze(job.history.end() - long(gen), job.history.end())) return {};
  return r == job.history ? std::vector<int32_t>{} : r;
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
  push_text(job, job.stops->feed(job.text->push(token)));
  // Counted after parsing: a token belongs to reasoning until the parser leaves it.
  if (job.reasoning) job.usage.reasoning_tokens++;
  if (job.stops->matched()) return finish(job, Finish::kStopString);
  if (job.usage.completion_tokens >= job.req.max_tokens) return finish(job, Finish::kLength);
  if (int64_t(job.history.size()) + 1 >= context_size_) return finish(job, Finish::kContext);
}

void Engine::decode_batch(std::vector<Job*>& jobs) {
  // One forward per session for now; a batched backend takes the whole list in one pass.
  for (Job* j : jobs) {
    if (j->phase != Job::Phase::kDecode || j->to_feed < 0) continue;
    const int32_t t = j->to_feed;
    try {
      if (spec_depth_ > 0 && spec_decode(*j)) continue;  // engine_spec.cpp
      model_->forward(*j->state, std::span<const int32_t>(&t, 1), Logits::kLast, j->logits);
      j->history.push_back(t);
      j->to_feed = -1;
    } catch (const std::exception& e) {
      j->handle->push(error_event(e.what()));
      j->phase = Job::Phase::kDone;
    }
  }
}

void Engine::finish(Job& job, Finish why) {
  const bool publish = why != Finish::kCancelled && why != Finish::kError && job.state;
  if (why != Finish::kCancelled && why != Finish::kError) {
    // Release held-back text (no stop string matched) and whatever the parser buffers.
    if (job.text && why != Finish::kStopString) push_text(job, job.stops->feed(job.text->finish()));
    if (job.stops && !job.stops->matched()) push_text(job, job.stops->flush());
    flush_parser(job);
  } else if (job.parser) {
    // Cancel keeps the partial text: flush what was already accepted.
    if (job.stops) push_text(job, job.stops->flush());
    flush_parser(job);
  }
  if (publish && job.phase == Job::Phase::kDecode) {
    try {
      if (job.to_feed >= 0) {
        const int32_t t = job.to_feed;
        model_->forward(*job.state, std::span<const int32_t>(&t, 1), Logits::kLast, job.logits);
        job.history.push_back(t);
        job.to_feed = -1;
      }
      std::vector<int32_t> alias = why == Finish::kStop ? turn_alias(*codec_, job) : std::vector<int32_t>{};
      if (checkpoints_) checkpoints_->save(job.history, *job.state, job.logits, alias);
      cache_.insert(std::move(job.history), std::move(job.state), std::move(job.logits), std::move(alias));
    } catch (const std::exception&) {
      // A failed final feed only loses the snapshot; the answer is already complete.
    }
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
  job.handle->push(std::move(done));
  job.phase = Job::Phase::kDone;
  job.state.reset();
}

}  // namespace ds4::engine
